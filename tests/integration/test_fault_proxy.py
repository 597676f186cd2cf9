"""The fault-injecting proxy of the test bed (treasury_pytest.faults) in front of a real
localstripe: each fault, the idempotency layer, and the localstripe stand-ins.

What reached localstripe is read back from localstripe itself (with the SDK, not through the
proxy) as well as from the proxy's log.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator

import pytest
import stripe

from treasury_pytest.faults import (
    Delivery,
    Fault,
    FaultKind,
    FaultProxy,
    FaultRule,
    ProxyRequest,
)
from treasury_pytest.localstripe import localstripe_proxy

#: localstripe takes any secret key of this shape.
KEY = "sk_test_faults"


@pytest.fixture
def proxy(localstripe_url: str) -> Iterator[FaultProxy]:
    with localstripe_proxy(localstripe_url) as running:
        yield running


@pytest.fixture
def at_localstripe(localstripe_url: str) -> stripe.StripeClient:
    """localstripe itself, not through the proxy."""
    return stripe.StripeClient(KEY, base_addresses={"api": localstripe_url})


def through(proxy: FaultProxy, *, timeout: float = 30.0) -> stripe.StripeClient:
    """The SDK through the proxy, without its own retries (each request is one exchange)."""
    return stripe.StripeClient(
        KEY,
        base_addresses={"api": proxy.url},
        max_network_retries=0,
        http_client=stripe.new_default_http_client(timeout=timeout),
    )


def send(
    proxy: FaultProxy,
    method: str,
    target: str,
    body: dict[str, str] | None = None,
    *,
    key: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One raw request through the proxy: its status, headers (lower-case names) and body.
    A closed connection raises http.client.RemoteDisconnected."""
    parts = urllib.parse.urlsplit(proxy.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    headers = {"Authorization": f"Bearer {KEY}"}
    data = None
    if body is not None:
        data = urllib.parse.urlencode(body).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    if key is not None:
        headers["Idempotency-Key"] = key
    try:
        connection.request(method, target, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def email() -> str:
    return f"{uuid.uuid4().hex}@example.com"


def customers(at_localstripe: stripe.StripeClient, address: str) -> list[str]:
    """The ids of localstripe's Customers with ``address``."""
    listed = at_localstripe.v1.customers.list(params={"email": address, "limit": 100})
    return [c.id for c in listed.data]


# --- the idempotency layer ------------------------------------------------------------------


def test_a_repeated_key_gets_the_first_answer_without_reaching_upstream(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    address, key = email(), uuid.uuid4().hex
    first = send(proxy, "POST", "/v1/customers", {"email": address}, key=key)
    again = send(proxy, "POST", "/v1/customers", {"email": address}, key=key)
    assert first[0] == again[0] == 200
    assert again[2] == first[2]
    assert again[1]["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first[1]
    assert len(customers(at_localstripe, address)) == 1
    assert len(proxy.upstream_calls("POST", "/v1/customers")) == 1
    assert [e.deliveries for e in proxy.exchanges("POST")] == [
        (Delivery.FORWARDED,),
        (Delivery.REPLAYED,),
    ]


def test_a_key_reused_with_other_params_is_stripes_idempotency_error(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    client, key = through(proxy), uuid.uuid4().hex
    one, other = email(), email()
    client.v1.customers.create(params={"email": one}, options={"idempotency_key": key})
    with pytest.raises(stripe.IdempotencyError) as refused:
        client.v1.customers.create(params={"email": other}, options={"idempotency_key": key})
    assert refused.value.http_status == 400
    assert customers(at_localstripe, other) == []
    assert proxy.exchanges("POST")[-1].deliveries == (Delivery.MISMATCH,)


def test_the_same_key_on_another_path_is_a_mismatch(proxy: FaultProxy) -> None:
    key = uuid.uuid4().hex
    assert send(proxy, "POST", "/v1/customers", {"email": email()}, key=key)[0] == 200
    status, _, body = send(proxy, "POST", "/v1/products", {"name": "x"}, key=key)
    assert status == 400
    assert json.loads(body)["error"]["type"] == "idempotency_error"
    assert proxy.upstream_calls("POST", "/v1/products") == []


def test_keys_are_the_accounts_own(proxy: FaultProxy) -> None:
    # Stripe keeps keys per account: another secret key's request is its own.
    key, address = uuid.uuid4().hex, email()
    mine = through(proxy)
    theirs = stripe.StripeClient(
        "sk_test_someone_else", base_addresses={"api": proxy.url}, max_network_retries=0
    )
    a = mine.v1.customers.create(params={"email": address}, options={"idempotency_key": key})
    b = theirs.v1.customers.create(params={"email": address}, options={"idempotency_key": key})
    assert a.id != b.id
    assert len(proxy.upstream_calls("POST", "/v1/customers")) == 2


def test_a_key_whose_request_is_still_at_the_provider_is_a_409(proxy: FaultProxy) -> None:
    reached = threading.Event()

    def slow_first(request: ProxyRequest) -> Fault | None:
        if request.seq == 1:
            reached.set()
            return Fault.slow(60)
        return None

    proxy.set_plan(slow_first)
    key, body = uuid.uuid4().hex, {"email": email()}
    first = threading.Thread(
        target=lambda: _ignore_errors(lambda: send(proxy, "POST", "/v1/customers", body, key=key))
    )
    first.start()
    try:
        assert reached.wait(30)
        # The key is in flight from the moment the plan has been asked about its request.
        status, _, answer = send(proxy, "POST", "/v1/customers", body, key=key)
        assert status == 409
        error = json.loads(answer)["error"]
        assert (error["type"], error["code"]) == ("idempotency_error", "idempotency_key_in_use")
        assert proxy.upstream_calls("POST", "/v1/customers") == []
    finally:
        proxy.close()  # cuts the slow request short
        first.join(30)
    (refused,) = [e for e in proxy.exchanges() if e.seq == 2]
    assert refused.deliveries == (Delivery.IN_FLIGHT,)


def _ignore_errors(call: Callable[[], object]) -> None:
    # The proxy closes under this request: it is not what the test asserts on.
    with contextlib.suppress(OSError):
        call()


def test_forget_keys_lets_a_key_reach_upstream_again(proxy: FaultProxy) -> None:
    key, body = uuid.uuid4().hex, {"email": email()}
    send(proxy, "POST", "/v1/customers", body, key=key)
    proxy.forget_keys()
    send(proxy, "POST", "/v1/customers", body, key=key)
    assert len(proxy.upstream_calls("POST", "/v1/customers")) == 2


def test_a_key_on_a_get_is_not_honoured(proxy: FaultProxy) -> None:
    key = uuid.uuid4().hex
    for _ in range(2):
        assert send(proxy, "GET", "/v1/customers?limit=1", key=key)[0] == 200
    assert len(proxy.upstream_calls("GET", "/v1/customers")) == 2
    assert all(e.key is None for e in proxy.exchanges())


def test_a_decline_is_stored_and_a_400_is_not(proxy: FaultProxy) -> None:
    # Stripe keeps what its endpoint executed (a 402 decline) but not a validation refusal.
    key = uuid.uuid4().hex
    bad = {"amount": "-1", "currency": "usd"}
    assert send(proxy, "POST", "/v1/payment_intents", bad, key=key)[0] == 400
    assert send(proxy, "POST", "/v1/payment_intents", bad, key=key)[0] == 400
    assert len(proxy.upstream_calls("POST", "/v1/payment_intents")) == 2
    declined = {"type": "card", "card[number]": "4000000000000341", "card[exp_month]": "12"}
    declined |= {"card[exp_year]": "2040", "card[cvc]": "123"}
    method = json.loads(send(proxy, "POST", "/v1/payment_methods", declined)[2])["id"]
    charge = {"amount": "100", "currency": "usd", "payment_method": method, "confirm": "true"}
    charge["payment_method_types[]"] = "card"
    first = send(proxy, "POST", "/v1/payment_intents", charge, key=key + "x")
    again = send(proxy, "POST", "/v1/payment_intents", charge, key=key + "x")
    assert first[0] == again[0] == 402
    assert again[1]["idempotent-replayed"] == "true"
    assert len(proxy.upstream_calls("POST", "/v1/payment_intents")) == 3


# --- faults ---------------------------------------------------------------------------------


def test_a_drop_reaches_nothing_and_keeps_nothing_under_the_key(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.drop(), "POST", "/v1/customers")
    key, address = uuid.uuid4().hex, email()
    with pytest.raises(http.client.RemoteDisconnected):
        send(proxy, "POST", "/v1/customers", {"email": address}, key=key)
    assert customers(at_localstripe, address) == []
    status, headers, _ = send(proxy, "POST", "/v1/customers", {"email": address}, key=key)
    assert status == 200
    assert "idempotent-replayed" not in headers  # the retry reached localstripe
    assert len(customers(at_localstripe, address)) == 1
    dropped, retried = proxy.exchanges()
    assert (dropped.fault, dropped.deliveries, dropped.answered) == (Fault.drop(), (), False)
    assert (retried.fault, retried.deliveries) == (None, (Delivery.FORWARDED,))


def test_a_lost_answer_was_acted_on_and_its_retry_is_replayed(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.lose_answer(), "POST", "/v1/customers")
    key, address = uuid.uuid4().hex, email()
    with pytest.raises(http.client.RemoteDisconnected):
        send(proxy, "POST", "/v1/customers", {"email": address}, key=key)
    made = customers(at_localstripe, address)
    assert len(made) == 1
    status, headers, body = send(proxy, "POST", "/v1/customers", {"email": address}, key=key)
    assert (status, headers["idempotent-replayed"], json.loads(body)["id"]) == (
        200,
        "true",
        made[0],
    )
    assert customers(at_localstripe, address) == made
    lost, replayed = proxy.exchanges()
    assert (lost.deliveries, lost.status) == ((Delivery.FORWARDED,), None)
    assert replayed.deliveries == (Delivery.REPLAYED,)


def test_a_lost_answer_of_an_unkeyed_request_is_acted_on_again_by_its_retry(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.lose_answer(), "POST", "/v1/customers")
    address = email()
    with pytest.raises(http.client.RemoteDisconnected):
        send(proxy, "POST", "/v1/customers", {"email": address})
    send(proxy, "POST", "/v1/customers", {"email": address})
    assert len(customers(at_localstripe, address)) == 2  # what keys are for


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_is_answered_without_forwarding_and_not_kept(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient, status: int
) -> None:
    proxy.inject(Fault.server_error(status), "POST", "/v1/customers")
    client, key, address = through(proxy), uuid.uuid4().hex, email()
    params = {"email": address}
    with pytest.raises(stripe.APIError) as failed:
        client.v1.customers.create(params=params, options={"idempotency_key": key})
    assert failed.value.http_status == status
    assert customers(at_localstripe, address) == []
    created = client.v1.customers.create(params=params, options={"idempotency_key": key})
    assert customers(at_localstripe, address) == [created.id]


def test_a_429_is_answered_without_forwarding(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.rate_limited(), "POST", "/v1/customers")
    address = email()
    with pytest.raises(stripe.RateLimitError):
        through(proxy).v1.customers.create(params={"email": address})
    assert customers(at_localstripe, address) == []
    assert proxy.upstream_calls("POST") == []


def test_a_429_that_says_retry_is_retried_by_the_sdk(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.rate_limited(headers={"Stripe-Should-Retry": "true"}), "POST")
    client = stripe.StripeClient(KEY, base_addresses={"api": proxy.url}, max_network_retries=1)
    address = email()
    created = client.v1.customers.create(params={"email": address})
    assert customers(at_localstripe, address) == [created.id]
    assert [e.status for e in proxy.exchanges("POST")] == [429, 200]


def test_a_delayed_answer_times_the_client_out_after_upstream_acted(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.delay(60), "POST", "/v1/customers")
    client, key, address = through(proxy, timeout=0.5), uuid.uuid4().hex, email()
    params = {"email": address}
    with pytest.raises(stripe.APIConnectionError):
        client.v1.customers.create(params=params, options={"idempotency_key": key})
    proxy.wait_idle()  # the delivery is over; its answer is what is held
    made = customers(at_localstripe, address)
    assert len(made) == 1
    # The retry with the key gets the answer the client never saw.
    again = client.v1.customers.create(params=params, options={"idempotency_key": key})
    assert again.id == made[0]
    assert len(proxy.upstream_calls("POST", "/v1/customers")) == 1
    delayed = proxy.exchanges("POST")[0]
    assert (delayed.fault, delayed.status) == (Fault.delay(60), 200)


def test_a_keyed_duplicate_is_acted_on_once(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.duplicate(), "POST", "/v1/customers")
    address = email()
    created = through(proxy).v1.customers.create(
        params={"email": address}, options={"idempotency_key": uuid.uuid4().hex}
    )
    assert customers(at_localstripe, address) == [created.id]
    (exchange,) = proxy.exchanges("POST")
    assert exchange.deliveries == (Delivery.FORWARDED, Delivery.REPLAYED)
    assert [c.by for c in proxy.upstream_calls("POST")] == ["client"]


def test_an_unkeyed_duplicate_reaches_upstream_twice(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    proxy.inject(Fault.duplicate(), "POST", "/v1/customers")
    address = email()
    status, _, body = send(proxy, "POST", "/v1/customers", {"email": address})
    assert status == 200
    made = customers(at_localstripe, address)
    assert len(made) == 2
    assert json.loads(body)["id"] in made  # the client got one of the two answers
    assert [c.by for c in proxy.upstream_calls("POST")] == ["client", "duplicate"]


# --- plans ----------------------------------------------------------------------------------


def test_a_rule_applies_to_its_window_of_matching_requests_only(proxy: FaultProxy) -> None:
    proxy.set_plan([FaultRule(Fault.server_error(503), "GET", r"/v1/customers", first=2, times=2)])
    statuses = []
    for target in ("/v1/customers", "/v1/products", "/v1/customers", "/v1/customers"):
        statuses.append(send(proxy, "GET", target)[0])
    statuses.append(send(proxy, "GET", "/v1/customers")[0])
    # The 2nd and 3rd GET of /v1/customers; /v1/products is not counted.
    assert statuses == [200, 200, 503, 503, 200]


def test_the_first_rule_whose_window_holds_wins(proxy: FaultProxy) -> None:
    proxy.set_plan(
        [
            FaultRule(Fault.server_error(502), "GET", r"/v1/customers", times=1),
            FaultRule(Fault.server_error(503), path=r"/v1/.*", times=None),
        ]
    )
    assert [send(proxy, "GET", "/v1/customers")[0] for _ in range(3)] == [502, 503, 503]
    proxy.set_plan(None)
    assert send(proxy, "GET", "/v1/customers")[0] == 200


def test_a_rule_can_match_only_keyed_requests(proxy: FaultProxy) -> None:
    proxy.set_plan([FaultRule(Fault.server_error(), "POST", keyed=True, times=None)])
    assert send(proxy, "POST", "/v1/customers", {"email": email()})[0] == 200
    assert send(proxy, "POST", "/v1/customers", {"email": email()}, key="k" + email())[0] == 500


def test_a_plan_function_sees_each_request(proxy: FaultProxy) -> None:
    seen: list[tuple[int, str, str, str | None]] = []

    def plan(request: ProxyRequest) -> Fault | None:
        seen.append((request.seq, request.method, request.path, request.key))
        return Fault.server_error() if b"fail" in request.body else None

    proxy.set_plan(plan)
    assert send(proxy, "POST", "/v1/customers", {"description": "fail"}, key="a")[0] == 500
    assert send(proxy, "POST", "/v1/customers", {"description": "pass"}, key="b")[0] == 200
    assert seen == [(1, "POST", "/v1/customers", "a"), (2, "POST", "/v1/customers", "b")]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Fault.answer(99),
        lambda: Fault.server_error(404),
        lambda: Fault.delay(0),
        lambda: Fault.slow(float("inf")),
        lambda: FaultRule(Fault.drop(), first=0),
        lambda: FaultRule(Fault.drop(), times=0),
        lambda: FaultRule(Fault.drop(), path="("),
    ],
)
def test_bad_faults_and_rules_are_refused(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match=r"."):
        make()


def test_a_plan_of_anything_but_rules_is_refused(proxy: FaultProxy) -> None:
    with pytest.raises(TypeError, match="FaultRule"):
        proxy.set_plan([Fault.drop()])  # type: ignore[list-item]


@pytest.mark.parametrize("upstream", ["localhost:8420", "ftp://x", "http://127.0.0.1:1/v1"])
def test_an_upstream_that_is_not_a_base_url_is_refused(upstream: str) -> None:
    with pytest.raises(ValueError, match="base URL"):
        FaultProxy(upstream)


def test_an_unreachable_upstream_is_a_502_kept_under_no_key() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FaultProxy.start(f"http://127.0.0.1:{port}") as nowhere:
        status, _, body = send(nowhere, "POST", "/v1/customers", {"email": email()}, key="k")
        assert (status, json.loads(body)["error"]["type"]) == (502, "api_error")
        assert nowhere.exchanges()[0].deliveries == (Delivery.UNREACHABLE,)
        assert nowhere.upstream_calls() == []


def test_fault_kinds_are_named() -> None:
    assert {k.value for k in FaultKind} == {
        "drop",
        "lose_answer",
        "answer",
        "delay",
        "slow",
        "duplicate",
    }


# --- the localstripe stand-ins --------------------------------------------------------------


def _intent(at_localstripe: stripe.StripeClient, **metadata: str) -> str:
    created = at_localstripe.v1.payment_intents.create(
        params={
            "amount": 100,
            "currency": "usd",
            "payment_method_types": ["card"],
            "metadata": metadata,
        }
    )
    return created.id


def test_search_finds_payment_intents_by_metadata(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    tag = uuid.uuid4().hex
    first = _intent(at_localstripe, test_tag=tag, side="a")
    second = _intent(at_localstripe, test_tag=tag, side="b")
    _intent(at_localstripe, test_tag=uuid.uuid4().hex, side="a")
    client = through(proxy)
    found = client.v1.payment_intents.search(params={"query": f"metadata['test_tag']:'{tag}'"})
    assert found.object == "search_result"
    assert [pi.id for pi in found.data] == [second, first]  # newest first
    assert found.has_more is False
    both = f"metadata['test_tag']:'{tag}' AND metadata[\"side\"]:\"a\""
    assert [pi.id for pi in client.v1.payment_intents.search(params={"query": both}).data] == [
        first
    ]
    none = client.v1.payment_intents.search(params={"query": "metadata['test_tag']:'nothing'"})
    assert none.data == []


def test_search_pages_with_next_page(
    proxy: FaultProxy, at_localstripe: stripe.StripeClient
) -> None:
    tag = uuid.uuid4().hex
    made = [_intent(at_localstripe, test_tag=tag) for _ in range(3)]
    client = through(proxy)
    query = {"query": f"metadata['test_tag']:'{tag}'", "limit": 2}
    page = client.v1.payment_intents.search(params=query)
    assert (len(page.data), page.has_more) == (2, True)
    every = [pi.id for pi in page.auto_paging_iter()]
    assert every == made[::-1]


def test_search_passes_expand_on(proxy: FaultProxy, at_localstripe: stripe.StripeClient) -> None:
    tag = uuid.uuid4().hex
    method = at_localstripe.v1.payment_methods.create(
        params={
            "type": "card",
            "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2040, "cvc": "123"},
        }
    )
    at_localstripe.v1.payment_intents.create(
        params={
            "amount": 100,
            "currency": "usd",
            "payment_method": method.id,
            "payment_method_types": ["card"],
            "metadata": {"test_tag": tag},
        }
    )
    found = through(proxy).v1.payment_intents.search(
        params={"query": f"metadata['test_tag']:'{tag}'", "expand": ["data.payment_method"]}
    )
    assert found.data[0].payment_method.card.last4 == "4242"


@pytest.mark.parametrize(
    "query",
    ["status:'succeeded'", "metadata['a']:'b' OR metadata['c']:'d'", "metadata['a']:'b' AND", ""],
)
def test_search_refuses_what_it_cannot_answer(proxy: FaultProxy, query: str) -> None:
    with pytest.raises(stripe.InvalidRequestError) as refused:
        through(proxy).v1.payment_intents.search(params={"query": query})
    assert refused.value.param == "query"


def _backdated(at_localstripe: stripe.StripeClient, localstripe_url: str, created: int) -> str:
    """A PaymentIntent whose ``created`` is set to ``created``: localstripe lets any field of
    its objects be updated, which makes time filters testable without waiting for the clock."""
    reference = _intent(at_localstripe)
    parts = urllib.parse.urlsplit(localstripe_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request(
            "POST",
            f"/v1/payment_intents/{reference}",
            body=json.dumps({"created": created}),
            headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        )
        assert connection.getresponse().status == 200
    finally:
        connection.close()
    return reference


@pytest.fixture
def backdated(at_localstripe: stripe.StripeClient, localstripe_url: str) -> tuple[int, list[str]]:
    """Four PaymentIntents made 0, 100, 100 and 200 seconds after a base time of their own
    (far in the past, so that no other test's intents are there)."""
    base = 1_000_000 + uuid.uuid4().int % 10**8 * 1_000
    made = [
        _backdated(at_localstripe, localstripe_url, base + offset) for offset in (0, 100, 100, 200)
    ]
    return base, made


def test_created_filters_the_list_newest_first(
    proxy: FaultProxy, backdated: tuple[int, list[str]]
) -> None:
    base, (oldest, middle, middle_later, newest) = backdated
    client = through(proxy)

    def listed(**created: int) -> list[str]:
        window = {"lt": base + 1_000, **created}
        params = {"created": window, "limit": 100}
        return [pi.id for pi in client.v1.payment_intents.list(params=params).data]

    assert listed(gte=base) == [newest, middle_later, middle, oldest]
    assert listed(gt=base) == [newest, middle_later, middle]
    assert listed(gte=base + 100, lte=base + 100) == [middle_later, middle]
    assert listed(gte=base, lt=base + 100) == [oldest]


def test_created_lists_page_with_starting_after_and_ending_before(
    proxy: FaultProxy, backdated: tuple[int, list[str]]
) -> None:
    base, made = backdated
    client = through(proxy)
    window = {"gte": base, "lt": base + 1_000}
    page = client.v1.payment_intents.list(params={"created": window, "limit": 3})
    assert ([pi.id for pi in page.data], page.has_more) == ([made[3], made[2], made[1]], True)
    every = [pi.id for pi in page.auto_paging_iter()]
    assert every == made[::-1]
    before = client.v1.payment_intents.list(
        params={"created": window, "limit": 2, "ending_before": made[0]}
    )
    assert ([pi.id for pi in before.data], before.has_more) == ([made[2], made[1]], True)


def test_a_created_equal_to_a_second(proxy: FaultProxy, backdated: tuple[int, list[str]]) -> None:
    base, made = backdated
    status, _, body = send(proxy, "GET", f"/v1/payment_intents?created={base + 200}&limit=100")
    assert status == 200
    assert [pi["id"] for pi in json.loads(body)["data"]] == [made[3]]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("created[gte]=yesterday", "created[gte]"),
        ("created[since]=1", "created[since]"),
        ("created[gte]=1&limit=500", "limit"),
        ("created[gte]=1&starting_after=pi_nope", "starting_after"),
    ],
)
def test_created_refuses_bad_filters_as_stripe_does(
    proxy: FaultProxy, query: str, param: str
) -> None:
    status, _, body = send(proxy, "GET", f"/v1/payment_intents?{query}")
    assert status == 400
    error = json.loads(body)["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)


def test_a_list_without_created_reaches_localstripe_as_it_is(proxy: FaultProxy) -> None:
    assert send(proxy, "GET", "/v1/payment_intents?limit=1")[0] == 200
    assert [(c.path, c.query, c.by) for c in proxy.upstream_calls()] == [
        ("/v1/payment_intents", "limit=1", "client")
    ]


def test_stand_ins_are_behind_the_faults(proxy: FaultProxy) -> None:
    proxy.inject(Fault.server_error(503), "GET", r"/v1/payment_intents/search")
    with pytest.raises(stripe.APIError):
        through(proxy).v1.payment_intents.search(params={"query": "metadata['a']:'b'"})
    assert proxy.upstream_calls() == []
