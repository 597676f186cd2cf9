"""Assembling a treasury: the one place that chooses concrete adapters.

:func:`bootstrap` reads the configuration, asks the plugin manager for factories, builds the
adapters and hands them to the services. Tests and embedding applications may pass adapters
directly (``storage=``, ``clock=``, ``ids=``) to override what configuration would pick.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

import pluggy

from treasury_core.config import TreasuryConfig
from treasury_core.currency import CurrencyRegistry
from treasury_core.errors import TreasuryError
from treasury_core.interface.projections import event_object
from treasury_core.interface.urls import INTERFACE_PATHS
from treasury_core.plugins import collect_factories, make_plugin_manager
from treasury_core.plugins.subscribers import event_subscribers
from treasury_core.ports import (
    BankRail,
    CardProvider,
    Clock,
    FxRates,
    IdSource,
    Storage,
    Vault,
    WebhookSender,
)
from treasury_core.ports.hosted_pages import HostedPages
from treasury_core.services import CompanyService, IdempotencyService, WalletService
from treasury_core.services.adapters import Adapters
from treasury_core.services.dashboard_sessions import DashboardSessionService
from treasury_core.services.events import EventFactory
from treasury_core.services.jobs import JobRunner
from treasury_core.services.movements.bank_accounts import BankAccountService, VirtualAccountService
from treasury_core.services.movements.bank_files import BankFilesService
from treasury_core.services.movements.deposits import DepositService
from treasury_core.services.movements.fx_quotes import FxQuotes
from treasury_core.services.movements.safeguarding import SafeguardingService
from treasury_core.services.movements.settlement import SettlementService
from treasury_core.services.movements.statements import WalletStatementService
from treasury_core.services.movements.system_accounts import open_system_accounts
from treasury_core.services.movements.transfers import TransferService
from treasury_core.services.movements.withdrawals import WithdrawalService
from treasury_core.services.notifications.service import NotificationService
from treasury_core.services.payments import PaymentService
from treasury_core.services.payments.capture import CaptureAndVoid
from treasury_core.services.payments.card_reconciliation import CardReconciliation
from treasury_core.services.payments.challenges import Challenges
from treasury_core.services.payments.charging import Charging
from treasury_core.services.payments.disputes import DisputeService
from treasury_core.services.payments.intent_steps import IntentSteps
from treasury_core.services.payments.jobs import PaymentJobs
from treasury_core.services.payments.links import LINK_EXPIRY, PaymentLinkService
from treasury_core.services.payments.provider_events import ProviderEventService
from treasury_core.services.payments.provider_resolution import ProviderResolution
from treasury_core.services.payments.refunds import Refunds
from treasury_core.services.payments.saved_cards import CardOnFileService
from treasury_core.services.record_reads import RecordService
from treasury_core.services.sandbox import SandboxService, load_clock_offset
from treasury_core.services.wallets import WalletCurrencies


class AdapterNotFound(TreasuryError):
    """Configuration names an adapter no plugin registers."""


@dataclass
class Treasury:
    """A wired treasury: configuration, adapters and services. Close it when done."""

    config: TreasuryConfig
    currencies: CurrencyRegistry
    storage: Storage
    clock: Clock
    ids: IdSource
    plugins: pluggy.PluginManager
    companies: CompanyService
    wallets: WalletService
    idempotency: IdempotencyService
    #: The configuration, currencies and ports the services share.
    adapters: Adapters
    #: FX quotes: fresh rates and converted amounts.
    quotes: FxQuotes
    #: The currencies of the wallets this process has read.
    wallet_currencies: WalletCurrencies
    #: Runs the jobs that fall due on the clock (settlements, expiries, payouts, ...).
    jobs: JobRunner
    deposits: DepositService
    withdrawals: WithdrawalService
    transfers: TransferService
    bank_accounts: BankAccountService
    virtual_accounts: VirtualAccountService
    #: Settles movements whose rail delay is up (its handlers run under :attr:`jobs`).
    settlement: SettlementService
    sandbox: SandboxService
    payments: PaymentService
    #: Closing payment links and intents' metadata.
    payment_links: PaymentLinkService
    cards: CardOnFileService
    notifications: NotificationService
    #: The card provider's events (webhooks), verified and applied.
    provider_events: ProviderEventService
    #: Chargebacks: read, and the merchant's evidence or acceptance.
    disputes: DisputeService
    #: Retrieve and list every kind of record; delete bank accounts, forget saved cards.
    records: RecordService
    #: Wallet transactions (the ledger history of a wallet) and statements.
    statements: WalletStatementService
    #: Payment files out, bank statements in (the files rail).
    bank: BankFilesService
    #: The bank's balances against the ledger: breaks and the safeguarding report.
    safeguarding: SafeguardingService
    #: The card provider's charges against the records; the card differences found.
    card_reconciliation: CardReconciliation
    #: Signed-in dashboard browsers, kept on the server.
    dashboard_sessions: DashboardSessionService

    def close(self) -> None:
        """Release the storage's connections and threads, and the card provider's and the FX
        adapter's when they have a ``close()`` (the Stripe provider's worker threads, the ECB
        adapter's fetching thread)."""
        # Not part of the ports: only an adapter that holds resources has one.
        for adapter in (self.payments.provider, self.adapters.fx):
            close_adapter = getattr(adapter, "close", None)
            if callable(close_adapter):
                close_adapter()
        self.storage.close()


def _require(pm: pluggy.PluginManager, kind: str, name: str) -> None:
    factories = collect_factories(pm, kind)
    if name not in factories:
        known = ", ".join(sorted(factories)) or "none"
        raise AdapterNotFound(f"No {kind} adapter named {name!r} (registered: {known})")


def _build(pm: pluggy.PluginManager, kind: str, name: str, *args: Any) -> Any:
    _require(pm, kind, name)
    return collect_factories(pm, kind)[name](*args)


def bootstrap(
    config: TreasuryConfig | None = None,
    *,
    plugins: pluggy.PluginManager | None = None,
    storage: Storage | None = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    migrate: bool = True,
    fx: FxRates | None = None,
    rail: BankRail | None = None,
    wall_clock: Clock | None = None,
    card_provider: CardProvider | None = None,
    vault: Vault | None = None,
    sender: WebhookSender | None = None,
    hosted_pages: HostedPages | None = None,
) -> Treasury:
    """Build a :class:`Treasury` from ``config`` (default: the sandbox on ``./treasury.db``).

    With ``migrate`` the storage schema is brought up to date first. ``clock`` is business
    time (the sandbox clock can be advanced); ``wall_clock`` is real time, which idempotency
    leases and retention use so that advancing business time never expires a key.
    ``sender`` carries webhooks and callbacks; the aiohttp app supplies an HTTP one when none
    is given (without one, deliveries wait in storage). ``hosted_pages`` says where the pages
    and URLs the services hand out live (a 3-D Secure return, a PMTI's form and confirm URL);
    by default the interface's (:data:`treasury_core.interface.urls.INTERFACE_PATHS`).
    """
    config = config or TreasuryConfig()
    pm = plugins or make_plugin_manager()
    # Every configured name is checked before anything is built: the bank rail is built on first
    # use, so an unknown rail would otherwise surface as a 500 on the first deposit, and a name
    # found wrong after the storage would leave a migrated database behind.
    chosen = {
        "clock": clock,
        "id_source": ids,
        "storage": storage,
        "fx_rates": fx,
        "bank_rail": rail,
        "card_provider": card_provider,
        "vault": vault,
        "notifier": sender,
    }
    names = {
        "clock": config.clock_name,
        "id_source": config.ids,
        "storage": config.storage_name,
        "fx_rates": config.fx_rates,
        "bank_rail": config.bank_rail,
        "card_provider": config.card_provider,
        "vault": config.vault,
        "notifier": config.webhook_sender,
    }
    for kind, name in names.items():
        if chosen[kind] is None and name is not None:
            _require(pm, kind, name)
    currencies = config.currency_registry()
    clock = clock or _build(pm, "clock", config.clock_name, config)
    ids = ids or _build(pm, "id_source", config.ids, config)
    storage = storage or _build(pm, "storage", config.storage_name, config)
    if migrate:
        storage.migrate()
    # Business time as it was left: the sandbox clock's offset is kept with the data.
    load_clock_offset(storage.clock_offsets(), clock)
    fx = fx or _build(pm, "fx_rates", config.fx_rates, config, clock)
    chosen_rail = rail

    def make_rail() -> BankRail:
        return chosen_rail or _build(pm, "bank_rail", config.bank_rail, config, clock)

    events = EventFactory(ids, clock, event_object)
    context = Adapters(
        config=config,
        currencies=currencies,
        storage=storage,
        clock=clock,
        ids=ids,
        rail_factory=make_rail,
        fx=fx,
        events=events,
    )
    open_system_accounts(storage, config, currencies, clock.now())
    quotes = FxQuotes(
        fx=fx, clock=clock, currencies=currencies, max_age_seconds=config.fx_max_age_seconds
    )
    wallet_currencies = WalletCurrencies(storage=storage)
    jobs = JobRunner(storage=storage, clock=clock)
    settlement = SettlementService(adapters=context)
    jobs.register_all(settlement.handlers())
    provider = card_provider or _build(pm, "card_provider", config.card_provider, config, clock)
    card_vault = vault or _build(pm, "vault", config.vault, config)
    pages = hosted_pages or INTERFACE_PATHS
    # Real time, always: receivers compare webhook-timestamp with their own clocks, and leases
    # must expire while business time stands still. Built once; ``wall_clock`` overrides it
    # for idempotency leases, retention and dashboard sessions only.
    real_time = _build(pm, "clock", "system", config)
    wall = wall_clock or real_time
    cards = CardOnFileService(
        context=context, provider=provider, vault=card_vault, hosted_pages=pages
    )
    if sender is None and config.webhook_sender is not None:
        sender = _build(pm, "notifier", config.webhook_sender, config)
    notifications = NotificationService(
        storage=storage,
        clock=clock,
        ids=ids,
        config=config,
        vault=card_vault,
        wall_clock=real_time,
        subscribers=partial(event_subscribers, pm),
        sender=sender,
    )
    steps = IntentSteps(
        context=context, provider=provider, delays_seconds=config.payment_delays_seconds
    )
    charging = Charging(
        context=context,
        steps=steps,
        provider=provider,
        hosted_pages=pages,
        saved_cards=cards.saved_card,
    )
    challenges = Challenges(context=context, steps=steps, provider=provider, charging=charging)
    capture = CaptureAndVoid(context=context, steps=steps, provider=provider)
    refunds = Refunds(context=context, steps=steps, provider=provider)
    payments = PaymentService(
        steps=steps, charging=charging, challenges=challenges, capture=capture, refunds=refunds
    )
    resolution = ProviderResolution(
        context=context, steps=steps, provider=provider, charging=charging
    )
    payment_jobs = PaymentJobs(
        context=context, steps=steps, provider=provider, resolution=resolution
    )
    payment_links = PaymentLinkService(context=context, steps=steps)
    jobs.register(LINK_EXPIRY, payment_links.link_expiry)
    jobs.register_all(payment_jobs.handlers())
    for kind, outside in payment_jobs.outside_handlers().items():
        jobs.register_outside(kind, outside)
    statements = WalletStatementService(storage=storage)
    every = config.card_reconciliation_seconds
    card_reconciliation = CardReconciliation(
        context=context,
        steps=steps,
        provider=provider,
        charging=charging,
        every=timedelta(seconds=every) if every > 0 else None,
        window=timedelta(seconds=config.card_reconciliation_window_seconds),
    )
    return Treasury(
        config=config,
        currencies=currencies,
        storage=storage,
        clock=clock,
        ids=ids,
        plugins=pm,
        companies=CompanyService(
            storage=storage, clock=clock, ids=ids, key_cache_seconds=config.api_key_cache_seconds
        ),
        wallets=WalletService(storage=storage, clock=clock, ids=ids, currencies=currencies),
        idempotency=IdempotencyService(
            storage,
            wall,
            ids,
            config.idempotency_ttl_seconds,
            config.idempotency_lease_seconds,
        ),
        adapters=context,
        quotes=quotes,
        wallet_currencies=wallet_currencies,
        jobs=jobs,
        deposits=DepositService(adapters=context, quotes=quotes, wallets=wallet_currencies),
        withdrawals=WithdrawalService(adapters=context, quotes=quotes),
        transfers=TransferService(adapters=context, quotes=quotes, wallets=wallet_currencies),
        bank_accounts=BankAccountService(adapters=context),
        virtual_accounts=VirtualAccountService(adapters=context, quotes=quotes),
        settlement=settlement,
        sandbox=SandboxService(
            storage=storage,
            clock=clock,
            sandbox=config.sandbox,
            jobs=jobs,
            notifications=notifications,
        ),
        payments=payments,
        payment_links=payment_links,
        cards=cards,
        notifications=notifications,
        provider_events=ProviderEventService(
            context=context,
            steps=steps,
            provider=provider,
            charging=charging,
            challenges=challenges,
            capture=capture,
            refunds=refunds,
        ),
        disputes=DisputeService(context=context, steps=steps),
        records=RecordService(storage=storage),
        statements=statements,
        bank=BankFilesService(adapters=context, quotes=quotes, statements=statements),
        safeguarding=SafeguardingService(adapters=context),
        card_reconciliation=card_reconciliation,
        dashboard_sessions=DashboardSessionService(
            storage=storage,
            wall_clock=wall,
            ids=ids,
            idle_seconds=config.dashboard_idle_timeout_seconds,
        ),
    )
