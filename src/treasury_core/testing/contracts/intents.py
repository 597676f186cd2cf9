"""The storage contract's payment intent tests: ids, company scoping, round trips, lists and
counts, rollbacks and unique lookup ids."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from treasury_core.payments.intents import (
    AUTHORIZATION_HOLD,
    CancellationReason,
    CaptureMethod,
    IntentFilter,
    IntentStatus,
    PaymentIntent,
    PaymentType,
)
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.fixtures import (
    NOW,
    Boom,
    add_intents,
    make_intent,
    setup_company,
)


class PaymentIntentContract:
    """The payment intent part of :class:`~treasury_core.testing.contracts.storage.StorageContract`.

    Mixed into the contract; each test takes the suite's ``storage`` fixture.
    """

    def test_intent_ids_increase_and_reads_are_scoped_to_the_company(
        self, storage: Storage
    ) -> None:
        """Intent ids increase; reads by id or lookup id honour the company scope."""
        company = setup_company(storage)
        other = setup_company(storage)
        first, second = add_intents(
            storage, make_intent(company, "pi_a"), make_intent(other, "pi_b")
        )
        (third,) = add_intents(storage, make_intent(company, "pi_c"))
        assert 0 < first.id < second.id < third.id
        assert first == make_intent(company, "pi_a").model_copy(update={"id": first.id})

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                uow.intents.get(first.id, company),
                uow.intents.get(first.id, None),
                uow.intents.get(first.id, other),
                uow.intents.get(third.id + 100, None),
                uow.intents.by_lookup_id("pi_a", company),
                uow.intents.by_lookup_id("pi_a", None),
                uow.intents.by_lookup_id("pi_a", other),
                uow.intents.by_lookup_id("pi_missing", None),
                uow.intents.get(second.id, other, for_update=True),
                uow.intents.by_lookup_id("pi_b", other, for_update=True),
            )

        assert storage.run_sync(read, write=False) == (
            first,
            first,
            None,
            None,
            first,
            first,
            None,
            None,
            second,
            second,
        )
        got = storage.run_sync(lambda uow: uow.intents.get(first.id, company), write=False)
        assert got is not None
        assert got.created_at.tzinfo is not None

    def test_an_intent_update_round_trips_every_field(self, storage: Storage) -> None:
        """Every field of an updated intent reads back equal and of its type."""
        company = setup_company(storage)
        (stored,) = add_intents(
            storage,
            make_intent(company, "pi_m", capture_method=CaptureMethod.MANUAL, account_id=7),
        )
        authorized = NOW + timedelta(minutes=1, microseconds=123456)
        changed = stored.model_copy(
            update={
                "status": IntentStatus.CANCELLED,
                "account_id": 8,
                "processing_amount": 1100,
                "processing_currency": "EUR",
                "payment_type": PaymentType.MOTO,
                "merchant_reference": "order-42",
                "checkin_date": date(2026, 3, 4),
                "card_token": "tok_1",
                "callback_url": "https://example.test/cb",
                "customer": "cus_1",
                "customer_email": "a@example.test",
                "authorized_at": authorized,
                "authorization_expires_at": authorized + AUTHORIZATION_HOLD,
                "cancellation_reason": CancellationReason.VOIDED,
                "provider_reference": "prov_1",
                "hold_pending_ids": ("pnd_1", "pnd_2"),
                "latest_transaction_id": "txn_9",
                "captured_at": None,
            }
        )
        changed = PaymentIntent.model_validate(changed.model_dump())  # the rules still hold
        storage.run_sync(lambda uow: uow.intents.update(changed))
        got = storage.run_sync(lambda uow: uow.intents.get(stored.id, company), write=False)
        assert got == changed
        assert got is not None
        assert isinstance(got.hold_pending_ids, tuple)
        assert isinstance(got.status, IntentStatus)
        assert isinstance(got.checkin_date, date)

        processed = make_intent(
            company,
            "pi_p",
            status=IntentStatus.PROCESSED,
            amount_refunded=250,
            processing_refunded=250,
            captured_at=NOW + timedelta(seconds=5),
        )
        (stored_p,) = add_intents(storage, processed)
        assert storage.run_sync(lambda uow: uow.intents.get(stored_p.id, None)) == stored_p
        assert stored_p.model_copy(update={"id": 0}) == processed

        missing = changed.model_copy(
            update={"id": stored_p.id + 100, "payment_intent_lookup_id": "x"}
        )
        with pytest.raises(LookupError):
            storage.run_sync(lambda uow: uow.intents.update(missing))

    def test_intent_lists_and_counts_agree_with_the_filter(self, storage: Storage) -> None:
        """Intent pages, lists and counts agree with each filter, newest first."""
        company = setup_company(storage)
        other = setup_company(storage)
        statuses = [IntentStatus.INITIALIZED, IntentStatus.PROCESSED]
        intents = add_intents(
            storage,
            *(
                make_intent(
                    company,
                    f"pi_{i}",
                    account_id=1 + i % 3,
                    created=NOW + timedelta(hours=i // 2),
                    status=statuses[i % 2],
                )
                for i in range(10)
            ),
            make_intent(other, "pi_other"),
        )
        mine = [i for i in intents if i.company_id == company]
        filters = [
            IntentFilter(),
            IntentFilter(status=IntentStatus.PROCESSED),
            IntentFilter(status=IntentStatus.CANCELLED),
            IntentFilter(account_id=2),
            IntentFilter(created_gte=NOW + timedelta(hours=1)),  # inclusive: i = 2, 3 match
            IntentFilter(created_lt=NOW + timedelta(hours=1)),  # exclusive: i = 2, 3 do not
            IntentFilter(created_gte=NOW + timedelta(hours=1), created_lt=NOW + timedelta(hours=3)),
            IntentFilter(
                status=IntentStatus.INITIALIZED, account_id=1, created_lt=NOW + timedelta(hours=4)
            ),
        ]
        for f in filters:
            expected = sorted((i for i in mine if f.matches(i)), key=lambda i: i.id, reverse=True)

            def read(
                uow: UnitOfWork, f: IntentFilter = f
            ) -> tuple[list[list[PaymentIntent]], list[PaymentIntent], int]:
                pages = [uow.intents.list(company, f, 3, None)]
                while len(pages[-1]) == 3:
                    pages.append(uow.intents.list(company, f, 3, pages[-1][-1].id))
                return pages, uow.intents.list(company, f, 100, None), uow.intents.count(company, f)

            pages, everything, count = storage.run_sync(read, write=False)
            assert [i for page in pages for i in page] == expected == everything, f
            assert count == len(expected), f

        assert len([i for i in mine if filters[4].matches(i)]) == 8
        assert len([i for i in mine if filters[5].matches(i)]) == 2
        assert storage.run_sync(lambda uow: uow.intents.count(other + 1, IntentFilter())) == 0
        cut = storage.run_sync(lambda uow: uow.intents.list(company, IntentFilter(), 2, mine[5].id))
        assert cut == [mine[4], mine[3]]

    def test_a_rolled_back_intent_leaves_nothing_and_ids_keep_increasing(
        self, storage: Storage
    ) -> None:
        """A rolled-back intent leaves nothing; later ids are still higher."""
        company = setup_company(storage)
        (before,) = add_intents(storage, make_intent(company, "pi_1"))
        taken: list[PaymentIntent] = []

        def fail(uow: UnitOfWork) -> None:
            taken.append(uow.intents.add(make_intent(company, "pi_2")))
            uow.intents.update(before.model_copy(update={"status": IntentStatus.PROCESSED}))
            raise Boom

        with pytest.raises(Boom):
            storage.run_sync(fail)

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                uow.intents.get(taken[0].id, None),
                uow.intents.by_lookup_id("pi_2", None),
                uow.intents.get(before.id, None),
                uow.intents.count(company, IntentFilter()),
            )

        assert storage.run_sync(read, write=False) == (None, None, before, 1)
        (after,) = add_intents(storage, make_intent(company, "pi_2"))
        assert after.id > before.id

    def test_a_duplicate_lookup_id_is_refused(self, storage: Storage) -> None:
        """A lookup id is unique across companies, on add and on update."""
        company = setup_company(storage)
        (first,) = add_intents(storage, make_intent(company, "pi_dup"))
        with pytest.raises(ValueError, match="pi_dup"):
            add_intents(storage, make_intent(company, "pi_other"), make_intent(company, "pi_dup"))
        with pytest.raises(ValueError, match="pi_dup"):
            add_intents(storage, make_intent(company + 1, "pi_dup"))
        (second,) = add_intents(storage, make_intent(company, "pi_two"))
        with pytest.raises(ValueError, match="pi_dup"):
            storage.run_sync(
                lambda uow: uow.intents.update(
                    second.model_copy(update={"payment_intent_lookup_id": "pi_dup"})
                )
            )

        def read(uow: UnitOfWork) -> tuple[object, ...]:
            return (
                uow.intents.list(company, IntentFilter(), 10, None),
                uow.intents.by_lookup_id("pi_other", None),
            )

        assert storage.run_sync(read, write=False) == ([second, first], None)
