"""The SQL unit of work makes each repository once, on first use, and keeps it."""

from __future__ import annotations

from sqlalchemy import create_engine

from treasury_sqlalchemy.repositories import SqlLedger, SqlUnitOfWork, _made_on_first_use


def test_a_repository_is_made_on_first_use_and_kept() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        uow = SqlUnitOfWork(conn, lock_rows=False)
        assert "ledger" not in vars(uow)
        ledger = uow.ledger
        assert isinstance(ledger, SqlLedger)
        assert vars(uow)["ledger"] is ledger  # kept on the instance: later uses skip the descriptor
        assert uow.ledger is ledger
        assert SqlUnitOfWork(conn, lock_rows=False).ledger is not ledger  # one per unit of work
    assert isinstance(vars(SqlUnitOfWork)["ledger"], _made_on_first_use)


def test_every_repository_lands_under_its_own_name() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        uow = SqlUnitOfWork(conn, lock_rows=True)
        names = [n for n, v in vars(SqlUnitOfWork).items() if isinstance(v, _made_on_first_use)]
        assert len(names) == 11
        made = {name: getattr(uow, name) for name in names}
        assert {name: vars(uow)[name] for name in names} == made
        assert len({id(r) for r in made.values()}) == len(names)
