"""The plain reference model that :class:`~treasury_core.testing.machines.treasury.TreasuryMachine`
holds the treasury services to, and the checks that compare stored records with it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal
from enum import StrEnum

from treasury_core.currency import Currency, iso_currency
from treasury_core.errors import (
    InsufficientFunds,
    InvalidRequestError,
    NotFound,
    TreasuryError,
    ValidationFailed,
)
from treasury_core.ledger import Account, AccountKind
from treasury_core.ledger.invariants import (
    LedgerSnapshot,
)
from treasury_core.money import convert
from treasury_core.movements.records import (
    BankAccount,
    Deposit,
    Transfer,
    TreasuryRecord,
    VirtualAccount,
    Withdrawal,
)

#: A predicted refusal: the exception class and its ``code``.
Refusal = tuple[type[TreasuryError], str]

NOT_FOUND: Refusal = (NotFound, "resource_missing")
INSUFFICIENT: Refusal = (InsufficientFunds, "insufficient_funds")
TOO_SMALL: Refusal = (ValidationFailed, "amount_too_small")
TOO_LARGE: Refusal = (ValidationFailed, "amount_too_large")
MISMATCH: Refusal = (ValidationFailed, "currency_mismatch")
SAME_WALLET: Refusal = (ValidationFailed, "same_wallet")
NO_VIRTUAL_ACCOUNT: Refusal = (ValidationFailed, "virtual_account_unavailable")
NOT_PENDING: Refusal = (InvalidRequestError, "movement_not_pending")

#: A well-formed id that no run ever hands out, and ids that are not wallet ids at all.
UNKNOWN_SUFFIX = "9" * 26
MALFORMED_IDS = ("wal_nope!", "nope", f"dep_{UNKNOWN_SUFFIX}")  # wrong shape, wrong kind

#: The record kinds whose rows the "nothing changed" check compares.
RECORD_KINDS: tuple[type[TreasuryRecord], ...] = (
    Deposit,
    Withdrawal,
    Transfer,
    BankAccount,
    VirtualAccount,
)
MOVEMENT_KINDS: Mapping[str, type[TreasuryRecord]] = {
    "deposit": Deposit,
    "withdrawal": Withdrawal,
    "transfer": Transfer,
}
SYSTEM_KINDS = frozenset({AccountKind.WORLD, AccountKind.FX_LIQUIDITY, AccountKind.FEES})
COUNTERS = (
    "debits_posted",
    "credits_posted",
    "debits_pending_holds",
    "debits_pending_out",
    "credits_pending",
)
TEN_DIGITS = Context(prec=10, rounding=ROUND_HALF_EVEN)


# The reference model ---------------------------------------------------------------------------


@dataclass
class ModelAccount:
    """The model's view of one account: what its balance record shows (holds are always 0)."""

    balance: int = 0
    pending_in: int = 0
    pending_out: int = 0

    @property
    def available(self) -> int:
        """Balance less what outgoing reservations set aside; ``pending_in`` never counts."""
        return self.balance - self.pending_out


@dataclass(frozen=True)
class ModelWallet:
    """A wallet: whose it is and its currency."""

    id: str
    company_id: int
    currency: str


@dataclass(frozen=True)
class ModelBankAccount:
    """A registered withdrawal destination."""

    id: str
    company_id: int
    currency: str


@dataclass(frozen=True)
class ModelVirtualAccount:
    """A virtual account: the wallet it credits, its currency and the key incoming funds name."""

    id: str
    company_id: int
    wallet_id: str
    currency: str
    key: str


#: A movement's effect on the modelled accounts: (account id, amount), positive for a credit.
Legs = tuple[tuple[str, int], ...]


@dataclass
class ModelMovement:
    """A deposit, withdrawal or transfer: its legs, due time, status and expected record fields."""

    id: str
    kind: str  # "deposit", "withdrawal" or "transfer"
    company_id: int
    legs: Legs
    due_at: datetime | None
    status: str
    fields: dict[str, object] = field(default_factory=dict)
    rate: Decimal = Decimal(1)


class ReferenceTreasury:
    """The simplest treasury that could work: three ints per account, a dict of movements.

    Written from decisions.md and ledger-invariants.md, independently of the services: it knows
    which wallet each movement credits or debits and by how much, and when the sandbox settles it.
    Only wallets and fee accounts are modelled (world and FX liquidity are unguarded and follow
    from invariant 2, which the ledger checks cover).
    """

    def __init__(
        self, start: datetime, usd_rates: Mapping[str, str], delays: Mapping[str, int]
    ) -> None:
        self.now = start
        self.usd = {code: Decimal(str(rate)) for code, rate in usd_rates.items()}
        self.delays = dict(delays)
        self.fee_rules: dict[str, tuple[int, int]] = {"*": (0, 0)}
        self.companies: list[int] = []
        self.accounts: dict[str, ModelAccount] = {}
        self.wallets: dict[str, ModelWallet] = {}
        self.movements: dict[str, ModelMovement] = {}
        self.bank_accounts: dict[str, ModelBankAccount] = {}
        self.virtual_accounts: dict[str, ModelVirtualAccount] = {}
        self.events: Counter[tuple[str, str]] = Counter()
        self._currencies: dict[str, Currency] = {}

    # Money --------------------------------------------------------------------------------------

    def rate(self, source: str, target: str) -> Decimal:
        """Major units of ``target`` per major unit of ``source``: through USD, 10 digits."""
        if source == target:
            return Decimal(1)
        return TEN_DIGITS.divide(self.usd[target], self.usd[source])

    def convert(self, amount: int, source: str, target: str, rate: Decimal | None = None) -> int:
        """``amount`` minor units of ``source`` in minor units of ``target`` (the one rule)."""
        if source == target:
            return amount
        rate = self.rate(source, target) if rate is None else rate
        return convert(amount, self._currency(source), self._currency(target), rate)

    def fee(self, currency: str, amount: int) -> int:
        """The withdrawal fee: ``fixed + round_half_even(amount * bps / 10_000)``."""
        fixed, bps = self.fee_rules.get(currency, self.fee_rules["*"])
        quotient, remainder = divmod(amount * bps, 10_000)
        if 2 * remainder > 10_000 or (2 * remainder == 10_000 and quotient % 2 == 1):
            quotient += 1
        return fixed + quotient

    def _currency(self, code: str) -> Currency:
        if code not in self._currencies:
            self._currencies[code] = iso_currency(code)
        return self._currencies[code]

    # Lookups ------------------------------------------------------------------------------------

    def account(self, account_id: str) -> ModelAccount:
        """The account's counters (created at zero on first use)."""
        return self.accounts.setdefault(account_id, ModelAccount())

    def wallet_of(self, company_id: int, wallet_id: str) -> ModelWallet | None:
        """The company's wallet, or ``None`` (unknown, or another company's)."""
        wallet = self.wallets.get(wallet_id)
        return wallet if wallet is not None and wallet.company_id == company_id else None

    def pending(self, *kinds: str) -> list[str]:
        """Ids of pending movements (of ``kinds`` if given), sorted."""
        return sorted(
            m.id
            for m in self.movements.values()
            if m.status == "pending" and (not kinds or m.kind in kinds)
        )

    def settled(self) -> list[str]:
        """Ids of completed or failed movements, sorted."""
        return sorted(m.id for m in self.movements.values() if m.status != "pending")

    # Changes ------------------------------------------------------------------------------------

    def add_wallet(self, wallet: ModelWallet) -> None:
        """A new wallet, empty."""
        self.wallets[wallet.id] = wallet
        self.account(wallet.id)

    def move(self, legs: Legs) -> None:
        """Posted at once (same-currency transfers, virtual-account credits)."""
        for account_id, amount in legs:
            self.account(account_id).balance += amount

    def open(self, movement: ModelMovement, delay: str) -> None:
        """A pending movement: reserve its legs; the sandbox settles it after ``delay``."""
        movement.due_at = self.now + timedelta(seconds=self.delays[delay])
        for account_id, amount in movement.legs:
            account = self.account(account_id)
            if amount > 0:
                account.pending_in += amount
            else:
                account.pending_out -= amount
        self.movements[movement.id] = movement

    def record(self, movement: ModelMovement, event: str | None) -> None:
        """A movement already settled when created (and the event it fires, if any)."""
        self.movements[movement.id] = movement
        if event is not None:
            self.events[(event, movement.id)] += 1

    def settle(self, movement_id: str, status: str, received: int | None = None) -> None:
        """Complete (post; a deposit may receive another sum) or fail (release) a movement."""
        movement = self.movements[movement_id]
        assert movement.status == "pending", f"the model settles {movement_id} twice"
        for account_id, amount in movement.legs:
            account = self.account(account_id)
            if amount > 0:
                account.pending_in -= amount
            else:
                account.pending_out += amount
            if status == "completed" and received is None:
                account.balance += amount
        if status == "completed" and received is not None:
            # The bank delivered another sum: credit it, converted at the deposit's rate.
            wallet_id = movement.legs[0][0]
            wallet = self.wallets[wallet_id]
            source = str(movement.fields["from_currency_id"])
            to_amount = self.convert(received, source, wallet.currency, movement.rate)
            self.account(wallet_id).balance += to_amount
            movement.fields.update(from_amount=received, to_amount=to_amount)
        movement.status = status
        movement.fields["status"] = status
        if status == "failed":
            movement.fields["error"] = f"{movement.kind}_failed"
        self.events[(f"treasury.{movement.kind}.{status}", movement_id)] += 1

    def advance(self, seconds: int) -> list[str]:
        """Move time on and complete every pending movement now due; the ids completed."""
        self.now += timedelta(seconds=seconds)
        due = [
            m.id
            for m in self.movements.values()
            if m.status == "pending" and m.due_at is not None and m.due_at <= self.now
        ]
        for movement_id in sorted(due):
            self.settle(movement_id, "completed")
        return due


# The machine -----------------------------------------------------------------------------------


def plain(value: object) -> object:
    return value.value if isinstance(value, StrEnum) else value


def check_fields(record: TreasuryRecord, fields: Mapping[str, object]) -> None:
    """The record shows every expected field (``error`` compared by its code)."""
    for name, want in fields.items():
        have = getattr(record, name)
        if name == "error":
            have = None if have is None else have.code
        assert plain(have) == want, f"{record.id}: {name} is {have!r}, the model expects {want!r}"


def assert_unchanged(
    before: tuple[LedgerSnapshot, tuple[object, ...]],
    after: tuple[LedgerSnapshot, tuple[object, ...]],
    what: str,
) -> None:
    """Invariant 8, allowing only new, untouched system accounts."""
    (ledger_before, rest_before), (ledger_after, rest_after) = before, after
    assert ledger_after.postings == ledger_before.postings, f"refused {what} wrote postings"
    assert ledger_after.pendings == ledger_before.pendings, f"refused {what} changed reservations"
    old = {a.id: a for a in ledger_before.accounts}
    for account in ledger_after.accounts:
        if account.id in old:
            assert account == old.pop(account.id), f"refused {what} changed account {account.id}"
        else:
            assert untouched_system_account(account), (
                f"refused {what} left account {account} behind"
            )
    assert not old, f"refused {what} removed accounts {sorted(old)}"
    labels = ("records", "wallets", "events", "jobs")
    for label, was, now in zip(labels, rest_before, rest_after, strict=True):
        assert now == was, f"refused {what} changed the stored {label}: {was!r} -> {now!r}"


def untouched_system_account(account: Account) -> bool:
    return account.kind in SYSTEM_KINDS and all(getattr(account, c) == 0 for c in COUNTERS)
