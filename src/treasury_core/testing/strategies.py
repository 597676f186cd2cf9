"""Hypothesis strategies for treasury-core: currencies, amounts, wallets, accounts and programs.

For property tests of code that embeds treasury-core, e.g.::

    from hypothesis import given
    from treasury_core.ledger.invariants import check_invariants
    from treasury_core.testing.strategies import ledger_programs, run_program

    @given(ledger_programs())
    def test_my_storage_keeps_the_ledger_invariants(program):
        storage = make_my_storage()
        run_program(storage, program)
        check_invariants(storage)

What there is:

- :func:`currencies`, :func:`currency_sets`: enabled ISO codes (of a registry, or the defaults);
- :func:`amounts`, :func:`overdraft_limits`: ``int`` minor units;
- :func:`wallet_requests` (and :func:`wallet_names`): ``CreateWalletRequest`` bodies for
  ``treasury.wallets.create``, the service-level wallet;
- :func:`wallet_accounts`, :func:`accounts`: ledger accounts for ``uow.ledger.open_account``;
- :func:`ledger_programs` with :func:`run_program`: operation sequences against the storage port.
  For sequences that react to the state as they go, subclass the stateful machines of
  :mod:`treasury_core.testing.machines.ledger` (ledger),
  :mod:`treasury_core.testing.machines.treasury`
  and :mod:`treasury_core.testing.machines.payments` (services).

A :class:`LedgerProgram` is a set of accounts plus a sequence of journals and clock advances. It is
generated without looking at any ledger, so some of its journals are refused (an overdraft, a
capture after the deadline, a pending movement resolved twice); :func:`run_program` applies it and
reports which were refused. Amounts stay far below 2**63 so no sum overflows a ``BIGINT``.

This module needs Hypothesis (a test dependency); the rest of :mod:`treasury_core.testing`
does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeVar

from hypothesis import strategies as st

from treasury_core.currency import DEFAULT_CURRENCIES, CurrencyRegistry
from treasury_core.errors import InsufficientFunds, LedgerRejected
from treasury_core.ledger import (
    Account,
    AccountKind,
    ExpirePending,
    Journal,
    LedgerPlan,
    Leg,
    Move,
    PendingCategory,
    PostPending,
    Reserve,
    VoidPending,
)
from treasury_core.ports.storage import Storage, UnitOfWork
from treasury_core.testing.fakes.clock import FakeClock
from treasury_core.validation import REFUSED_RANGES
from treasury_core.wallets import CreateWalletRequest

__all__ = [
    "MAX_AMOUNT",
    "AdvanceClock",
    "ApplyJournal",
    "LedgerOperation",
    "LedgerProgram",
    "Refusal",
    "accounts",
    "amounts",
    "currencies",
    "currency_sets",
    "ledger_programs",
    "overdraft_limits",
    "pending_categories",
    "run_program",
    "wallet_accounts",
    "wallet_names",
    "wallet_requests",
]

#: The default largest amount: a trillion minor units, so thousands of them still sum far below
#: 2**63 (the ``BIGINT`` counters of the SQL storage).
MAX_AMOUNT = 10**12

#: The refusals a valid journal can meet; anything else raised by the ledger is a bug.
Refusal = InsufficientFunds | LedgerRejected

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_T = TypeVar("_T")


def currencies(registry: CurrencyRegistry | None = None) -> st.SearchStrategy[str]:
    """ISO codes of the currencies enabled in ``registry`` (default: the sandbox's nine).

    Shrinks towards the alphabetically first code.
    """
    if registry is None:
        codes: Sequence[str] = sorted(DEFAULT_CURRENCIES)
    else:
        codes = [c.code for c in registry]
    if not codes:
        raise ValueError("the registry enables no currency")
    return st.sampled_from(codes)


def currency_sets(
    registry: CurrencyRegistry | None = None, *, min_size: int = 1, max_size: int = 3
) -> st.SearchStrategy[list[str]]:
    """Lists of distinct enabled currency codes (for multi-currency scenarios such as FX)."""
    return st.lists(currencies(registry), min_size=min_size, max_size=max_size, unique=True)


def amounts(max_value: int = MAX_AMOUNT, *, min_value: int = 1) -> st.SearchStrategy[int]:
    """Positive ``int`` amounts in minor units, ``min_value``..``max_value`` inclusive.

    Small amounts and the bounds are generated often (Hypothesis favours them), which is where
    off-by-one bugs in balance checks live.
    """
    if min_value < 1 or max_value < min_value:
        raise ValueError("amounts are positive: need 1 <= min_value <= max_value")
    return st.integers(min_value=min_value, max_value=max_value)


def overdraft_limits(max_value: int = 100_000) -> st.SearchStrategy[int]:
    """Overdraft limits: mostly none (0), otherwise a positive limit up to ``max_value``."""
    return st.one_of(st.just(0), st.integers(min_value=1, max_value=max_value))


def pending_categories() -> st.SearchStrategy[PendingCategory]:
    """``hold`` (authorization) or ``out`` (withdrawal, transfer)."""
    return st.sampled_from(PendingCategory)


#: Unicode categories a name may not use: control characters (NUL among them), which the request
#: models refuse, and surrogates, which cannot be encoded at all.
_UNSAFE_CATEGORIES: tuple[Literal["Cc"], Literal["Cs"]] = ("Cc", "Cs")
#: The other characters the request models refuse (line separators, bidirectional controls),
#: from the one list in :mod:`treasury_core.validation`.
_REFUSED_CHARACTERS = "".join(
    chr(code) for first, last in REFUSED_RANGES for code in range(first, last + 1)
)


def wallet_names(max_size: int = 40) -> st.SearchStrategy[str]:
    """Names a wallet request accepts: any Unicode text without control characters,
    bidirectional controls or surrogates, not blank, at most ``max_size`` characters (the
    limit is 255).

    Non-ASCII letters, emoji, and leading or trailing spaces (which the request strips) come up,
    because a storage adapter that mangles them is exactly what these tests should find.
    """
    if not 1 <= max_size <= 255:
        raise ValueError("wallet names have 1 to 255 characters")
    text = st.text(
        st.characters(
            exclude_categories=_UNSAFE_CATEGORIES, exclude_characters=_REFUSED_CHARACTERS
        ),
        min_size=1,
        max_size=max_size,
    )
    return text.filter(lambda s: bool(s.strip()))


def wallet_requests(
    currency: str | st.SearchStrategy[str] | None = None,
    *,
    registry: CurrencyRegistry | None = None,
) -> st.SearchStrategy[CreateWalletRequest]:
    """Valid ``CreateWalletRequest`` bodies, for ``treasury.wallets.create(company_id, request)``.

    ``currency`` may be a fixed code or a strategy (default: :func:`currencies` of ``registry``).
    The description is absent, empty or free text with newlines. Every request generated passes
    the model's validation, so a refusal by the service is a finding, not noise.
    """
    descriptions = st.none() | st.text(
        st.characters(
            exclude_categories=_UNSAFE_CATEGORIES,
            exclude_characters=_REFUSED_CHARACTERS.replace("\n", "").replace("\t", ""),
            include_characters="\n\t",
        ),
        max_size=80,
    )
    return st.builds(
        CreateWalletRequest,
        name=wallet_names(),
        currency_id=_as_strategy(currency, currencies(registry)),
        description=descriptions,
    )


_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def _ids(prefix: str) -> st.SearchStrategy[str]:
    # Short enough for any backend's id columns (64 characters in the SQL schema).
    return st.text(_ID_ALPHABET, min_size=8, max_size=16).map(lambda s: f"{prefix}_{s}")


def wallet_accounts(
    currency: str | st.SearchStrategy[str] | None = None,
    *,
    company_id: int | st.SearchStrategy[int] | None = None,
    overdraft: bool = True,
) -> st.SearchStrategy[Account]:
    """Guarded wallet accounts with zero counters, ready for ``uow.ledger.open_account``.

    ``currency`` and ``company_id`` may be fixed values or strategies (default: any enabled
    currency, a company id from 1 to 1000). With ``overdraft``, some have an overdraft limit.
    Ids are random (``wal_…``); use ``st.lists(..., unique_by=lambda a: a.id)`` for several.
    """
    return st.builds(
        Account,
        id=_ids("wal"),
        currency=_as_strategy(currency, currencies()),
        kind=st.just(AccountKind.WALLET),
        company_id=_as_strategy(company_id, st.integers(min_value=1, max_value=1000)),
        guarded=st.just(True),
        overdraft_limit=overdraft_limits() if overdraft else st.just(0),
    )


def accounts(
    currency: str | st.SearchStrategy[str] | None = None,
    *,
    kinds: Sequence[AccountKind] = tuple(AccountKind),
) -> st.SearchStrategy[Account]:
    """Accounts of any of ``kinds``: wallets as :func:`wallet_accounts`, others unguarded."""
    currency_strategy = _as_strategy(currency, currencies())
    system_kinds = [k for k in kinds if k is not AccountKind.WALLET]
    options: list[st.SearchStrategy[Account]] = []
    if AccountKind.WALLET in kinds:
        options.append(wallet_accounts(currency_strategy))
    if system_kinds:
        options.append(
            st.builds(
                Account,
                id=_ids("sys"),
                currency=currency_strategy,
                kind=st.sampled_from(system_kinds),
                guarded=st.just(False),
            )
        )
    if not options:
        raise ValueError("no account kind to generate")
    return st.one_of(options)


@dataclass(frozen=True, slots=True)
class ApplyJournal:
    """Apply ``journal`` at the current time."""

    journal: Journal


@dataclass(frozen=True, slots=True)
class AdvanceClock:
    """Move the clock forward by ``seconds``."""

    seconds: int


LedgerOperation = ApplyJournal | AdvanceClock


@dataclass(frozen=True, slots=True)
class LedgerProgram:
    """Accounts to open, then operations to run from ``start`` (see :func:`run_program`)."""

    accounts: tuple[Account, ...]
    operations: tuple[LedgerOperation, ...]
    start: datetime = _EPOCH

    @property
    def journals(self) -> list[Journal]:
        """The program's journals, in order."""
        return [op.journal for op in self.operations if isinstance(op, ApplyJournal)]


def run_program(storage: Storage, program: LedgerProgram) -> list[Refusal | None]:
    """Open the program's accounts and apply its journals, one transaction per journal.

    Returns, per journal, ``None`` if it was applied or the refusal it met (:data:`Refusal`).
    Any other exception propagates: it means a bug, not a refused request. Time comes from a
    :class:`~treasury_core.testing.fakes.clock.FakeClock` started at ``program.start``.
    """
    clock = FakeClock(program.start)

    def open_accounts(uow: UnitOfWork) -> None:
        for account in program.accounts:
            uow.ledger.open_account(account)

    storage.run_sync(open_accounts)
    outcomes: list[Refusal | None] = []
    for operation in program.operations:
        if isinstance(operation, AdvanceClock):
            clock.advance(operation.seconds)
            continue
        try:
            storage.run_sync(_applier(operation.journal, clock.now()))
        except (InsufficientFunds, LedgerRejected) as refusal:
            outcomes.append(refusal)
        else:
            outcomes.append(None)
    return outcomes


def _applier(journal: Journal, now: datetime) -> Callable[[UnitOfWork], LedgerPlan]:
    return lambda uow: uow.ledger.apply(journal, now)


@st.composite
def ledger_programs(
    draw: st.DrawFn,
    *,
    currency_codes: st.SearchStrategy[list[str]] | None = None,
    max_wallets_per_currency: int = 3,
    max_operations: int = 30,
    max_amount: int = 1_000_000,
) -> LedgerProgram:
    """Ledger programs: for each of 1-3 currencies an unguarded world account, an FX liquidity
    account and guarded wallets; then deposits, transfers, reservations (hold or out, with or
    without deadline), full and partial posts, voids, expiries, multi-leg and FX journals, and
    clock advances.

    Phase-two legs name earlier reservations whether or not those were accepted and whatever
    became of them, so refusals (``pending_not_found``, ``pending_already_resolved``, …) are
    generated along with successes. ``max_amount`` bounds each amount: keep it small against
    deposits to make overdraft refusals and successes both common.
    """
    codes = draw(currency_codes if currency_codes is not None else currency_sets())
    if not codes:
        raise ValueError("a ledger program needs at least one currency")
    builder = _ProgramBuilder(draw, amounts(max_amount))
    for code in codes:
        wallet_count = draw(st.integers(min_value=1, max_value=max(1, max_wallets_per_currency)))
        builder.open_currency(
            code, [draw(overdraft_limits(max_amount)) for _ in range(wallet_count)]
        )
    choices = [*_SINGLE_LEGS, "advance", "multi"] + (["fx"] if len(codes) > 1 else [])
    for index in range(draw(st.integers(min_value=0, max_value=max_operations))):
        what = draw(st.sampled_from(choices))
        if what == "advance":
            builder.advance(draw(st.integers(min_value=1, max_value=7200)))
        elif what == "fx":
            builder.fx(f"jrn_{index:06d}")
        else:
            count = draw(st.integers(min_value=2, max_value=4)) if what == "multi" else 1
            kinds = (
                [what]
                if count == 1
                else [draw(st.sampled_from(_SINGLE_LEGS)) for _ in range(count)]
            )
            builder.journal(f"jrn_{index:06d}", kinds)
    return LedgerProgram(
        accounts=tuple(builder.accounts), operations=tuple(builder.operations), start=_EPOCH
    )


_SINGLE_LEGS = ("deposit", "move", "reserve", "post", "void", "expire")


class _ProgramBuilder:
    """The state :func:`ledger_programs` draws against: accounts, reservations, elapsed time."""

    def __init__(self, draw: st.DrawFn, money: st.SearchStrategy[int]) -> None:
        self.draw = draw
        self.money = money
        self.accounts: list[Account] = []
        self.operations: list[LedgerOperation] = []
        self.wallets: dict[str, list[str]] = {}
        self.world: dict[str, str] = {}
        self.liquidity: dict[str, str] = {}
        self.reserved: list[tuple[str, int]] = []  # (pending id, amount) of every Reserve leg
        self.elapsed = 0

    def open_currency(self, code: str, overdraft_limits: list[int]) -> None:
        self.world[code] = f"world_{code.lower()}"
        self.liquidity[code] = f"fxliq_{code.lower()}"
        self.accounts.append(Account(id=self.world[code], currency=code, kind=AccountKind.WORLD))
        self.accounts.append(
            Account(id=self.liquidity[code], currency=code, kind=AccountKind.FX_LIQUIDITY)
        )
        self.wallets[code] = [f"wal_{code.lower()}_{n}" for n in range(len(overdraft_limits))]
        for account_id, limit in zip(self.wallets[code], overdraft_limits, strict=True):
            self.accounts.append(
                Account(
                    id=account_id,
                    currency=code,
                    kind=AccountKind.WALLET,
                    company_id=1,
                    guarded=True,
                    overdraft_limit=limit,
                )
            )

    def advance(self, seconds: int) -> None:
        self.elapsed += seconds
        self.operations.append(AdvanceClock(seconds))

    def fx(self, journal_id: str) -> None:
        """A wallet sells one currency to FX liquidity and receives another from it."""
        draw = self.draw
        source, target = draw(
            st.lists(st.sampled_from(sorted(self.wallets)), min_size=2, max_size=2, unique=True)
        )
        sold = Move(
            draw(st.sampled_from(self.wallets[source])),
            self.liquidity[source],
            source,
            draw(self.money),
        )
        bought = Move(
            self.liquidity[target],
            draw(st.sampled_from(self.wallets[target])),
            target,
            draw(self.money),
        )
        self.operations.append(ApplyJournal(Journal(id=journal_id, legs=(sold, bought))))

    def journal(self, journal_id: str, kinds: list[str]) -> None:
        legs: list[Leg] = []
        for kind in kinds:
            legs.append(self._leg(kind, f"{journal_id}.{len(legs)}"))
        self.operations.append(ApplyJournal(Journal(id=journal_id, legs=tuple(legs))))

    def _leg(self, kind: str, leg_id: str) -> Leg:
        draw = self.draw
        code = draw(st.sampled_from(sorted(self.wallets)))
        parties = [*self.wallets[code], self.world[code], self.liquidity[code]]
        if kind in ("move", "reserve"):
            debit = draw(st.sampled_from(parties))
            credit = draw(st.sampled_from([p for p in parties if p != debit]))
        else:
            debit, credit = self.world[code], draw(st.sampled_from(self.wallets[code]))
        if kind == "deposit" or (kind in ("post", "void", "expire") and not self.reserved):
            return Move(debit, credit, code, draw(self.money))
        if kind == "move":
            return Move(debit, credit, code, draw(self.money))
        if kind == "reserve":
            amount = draw(self.money)
            offset = draw(st.none() | st.integers(min_value=1, max_value=7200))
            # Deadlines lie ahead of the clock as it will be when the journal runs.
            deadline = None if offset is None else _EPOCH + timedelta(seconds=self.elapsed + offset)
            self.reserved.append((leg_id, amount))
            return Reserve(debit, credit, code, amount, draw(pending_categories()), deadline)
        pending_id, reserved = draw(st.sampled_from(self.reserved))
        if kind == "post":
            # Up to one more than reserved: over-posting must be refused.
            part = draw(st.none() | st.integers(min_value=1, max_value=reserved + 1))
            return PostPending(pending_id, part)
        if kind == "void":
            return VoidPending(pending_id)
        return ExpirePending(pending_id)


def _as_strategy(
    value: _T | st.SearchStrategy[_T] | None, default: st.SearchStrategy[_T]
) -> st.SearchStrategy[_T]:
    if value is None:
        return default
    if isinstance(value, st.SearchStrategy):
        return value
    return st.just(value)
