"""The filtered record lists of issue 24 on every storage: each adapter's ``records.page``
returns exactly the records :meth:`RecordFilter.matches` passes, newest first, and the intent
filters' document fields agree with :meth:`IntentFilter.matches`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from treasury_core.listing import DELETED, RecordFilter
from treasury_core.movements.records import BankAccount, MovementStatus, Transfer
from treasury_core.payments.intents import IntentFilter, PaymentIntent
from treasury_core.payments.records import Refund, RefundStatus
from treasury_core.ports import Storage, UnitOfWork
from treasury_core.testing.contracts.storage import setup_company

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _transfer(n: int, company: int, source: str, target: str, status: MovementStatus) -> Transfer:
    return Transfer(
        id=f"trf_{n:02d}",
        company_id=company,
        from_wallet_id=source,
        to_wallet_id=target,
        from_amount=100,
        from_currency_id="USD",
        to_amount=100 if n % 2 else 90,
        to_currency_id="USD" if n % 2 else "EUR",
        exchange_rate_from_to=Decimal(1),
        reference=None,
        description=None,
        status=status,
        error=None,
        created_at=T0 + timedelta(hours=n),
        metadata={"order": f"o{n % 2}", **({"vip": "1"} if n % 3 == 0 else {})},
    )


def _refund(n: int, company: int, intent_id: int, status: RefundStatus) -> Refund:
    return Refund(
        id=f"re_{n:02d}",
        company_id=company,
        payment_intent_id=intent_id,
        amount=50,
        currency="USD" if n % 2 else "GBP",
        reason=None,
        status=status,
        failure_reason=None,
        created_at=T0 + timedelta(hours=n),
    )


def test_record_pages_agree_with_the_filter_rule(storage: Storage) -> None:
    company = setup_company(storage)
    other = setup_company(storage)
    statuses = list(MovementStatus)
    transfers = [
        _transfer(n, company, f"wal_a{n % 3}", f"wal_b{n % 2}", statuses[n % 3]) for n in range(9)
    ]
    theirs = _transfer(20, other, "wal_a0", "wal_b0", MovementStatus.PENDING)
    refunds = [_refund(n, company, 1 + n % 2, list(RefundStatus)[n % 3]) for n in range(6)]
    bank = BankAccount(
        id="ba_01",
        company_id=company,
        bank_name="B",
        account_name="A",
        account_number="000123456789",
        routing_number="021000021",
        currency_id="USD",
        created_at=T0,
    )
    deleted = bank.model_copy(update={"id": "ba_02", "status": DELETED})

    def add(uow: UnitOfWork) -> None:
        for record in [*transfers, theirs, *refunds, bank, deleted]:
            uow.records.add(record)

    storage.run_sync(add)

    transfer_filters = [
        RecordFilter(),
        RecordFilter(status="pending"),
        RecordFilter(wallet_id="wal_a1"),
        RecordFilter(wallet_id="wal_b0"),  # the receiving side of a transfer
        RecordFilter(currency="EUR"),
        RecordFilter(created_gte=T0 + timedelta(hours=3), created_lt=T0 + timedelta(hours=7)),
        RecordFilter(status="completed", wallet_id="wal_a1", currency="USD"),
        RecordFilter(wallet_id="wal_none"),
        # metadata[key]=value (issue 24 item 2), alone and with the other filters.
        RecordFilter(metadata={"order": "o1"}),
        RecordFilter(metadata={"order": "o0", "vip": "1"}),
        RecordFilter(status="pending", metadata={"vip": "1"}),
        RecordFilter(metadata={"order": "none"}),
    ]
    for filters in transfer_filters:
        got = storage.run_sync(
            lambda uow, f=filters: uow.records.page(Transfer, company, f, 100, None), write=False
        )
        expected = sorted(
            (t for t in transfers if filters.matches(t)), key=lambda t: t.id, reverse=True
        )
        assert [t.id for t in got] == [t.id for t in expected], filters
    # Paging keeps the filter.
    first = storage.run_sync(
        lambda uow: uow.records.page(Transfer, company, RecordFilter(status="pending"), 2, None)
    )
    rest = storage.run_sync(
        lambda uow: uow.records.page(
            Transfer, company, RecordFilter(status="pending"), 10, first[-1].id
        )
    )
    assert [t.id for t in first + rest] == ["trf_06", "trf_03", "trf_00"]

    for filters in (
        RecordFilter(payment_intent_id=2),
        RecordFilter(payment_intent_id=2, currency="USD"),
        RecordFilter(status="failed"),
    ):
        got_refunds = storage.run_sync(
            lambda uow, f=filters: uow.records.page(Refund, company, f, 100, None)
        )
        expected_refunds = sorted(
            (r for r in refunds if filters.matches(r)), key=lambda r: r.id, reverse=True
        )
        assert [r.id for r in got_refunds] == [r.id for r in expected_refunds], filters
        assert got_refunds, filters  # each filter above matches something
    # A deleted record is never listed.
    banks = storage.run_sync(
        lambda uow: uow.records.page(BankAccount, company, RecordFilter(), 10, None)
    )
    assert [b.id for b in banks] == ["ba_01"]


def test_intent_document_filters_agree_with_the_rule(storage: Storage) -> None:
    company = setup_company(storage)

    def intent(n: int) -> PaymentIntent:
        return PaymentIntent(
            id=0,
            company_id=company,
            account_id=1,
            billing_amount=1_000,
            billing_currency="USD" if n % 2 else "EUR",
            merchant_reference=f"order-{n % 3}",
            customer_email="ada@example.com" if n < 2 else None,
            payment_intent_lookup_id=f"pil_{n:04d}",
            created_at=T0 + timedelta(minutes=n),
        )

    stored = storage.run_sync(lambda uow: [uow.intents.add(intent(n)) for n in range(6)])
    for filters in (
        IntentFilter(merchant_reference="order-1"),
        IntentFilter(currency="EUR"),
        IntentFilter(customer_email="ada@example.com", currency="USD"),
        IntentFilter(merchant_reference="order-9"),
    ):
        got = storage.run_sync(lambda uow, f=filters: uow.intents.list(company, f, 100, None))
        expected = sorted((i for i in stored if filters.matches(i)), key=lambda i: -i.id)
        assert [i.id for i in got] == [i.id for i in expected], filters
        count = storage.run_sync(lambda uow, f=filters: uow.intents.count(company, f))
        assert count == len(expected)
