"""The webhook receiver over real HTTP: what verifies is recorded, everything else refused."""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from treasury_pytest import WebhookReceiver

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + "c2VjcmV0IG9mIHNvbWVib2R5IGVsc2UgZW50aXJlbHk="
BODY = '{"id":"evt_1","type":"treasury.deposit.completed","data":{"object":{"id":"dep_1"}}}'


def signed_headers(
    secret: str, body: str = BODY, event_id: str = "evt_1", at: datetime | None = None
) -> dict[str, str]:
    """The headers the server sends (treasury_core.services.notifications.service), signed by
    hand."""
    when = datetime.fromtimestamp(int((at or datetime.now(UTC)).timestamp()), UTC)
    return {
        "Content-Type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(secret).sign(event_id, when, body),
    }


def post(url: str, headers: dict[str, str], body: str = BODY) -> int:
    """POST and return the status, whatever it is."""
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def wait_until_waiting(receiver: WebhookReceiver, count: int = 1) -> None:
    """Return once ``count`` wait_for / wait_for_async calls are waiting for a delivery, so a
    delivery sent afterwards is one that wakes them (not one they find on their first look)."""
    state = receiver._state
    with state.lock:  # notified whenever a waiter starts waiting
        if not state.lock.wait_for(lambda: state.waiting >= count, timeout=10):
            raise TimeoutError(f"{count} waiter(s) expected, {state.waiting} waiting")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    # Built as the plugin's fixture builds it, with a secret trusted.
    with WebhookReceiver() as sink:
        sink.trust(SECRET)
        yield sink


def test_a_signed_delivery_is_verified_recorded_and_answered_200(receiver: WebhookReceiver) -> None:
    assert receiver.url.startswith("http://127.0.0.1:")
    assert post(receiver.url, signed_headers(SECRET)) == 200
    [received] = receiver.deliveries
    assert received.id == "evt_1"
    assert received.type == "treasury.deposit.completed"
    assert received.object == {"id": "dep_1"}
    assert received.body == BODY.encode()
    assert received.path == "/webhooks"
    assert received.status == 200
    assert received.headers["webhook-id"] == "evt_1"
    assert receiver.rejected == []
    assert receiver.wait_for("treasury.deposit.completed", timeout=0) is received


def test_a_signature_under_another_secret_is_refused(receiver: WebhookReceiver) -> None:
    assert post(receiver.url, signed_headers(OTHER_SECRET)) == 400
    assert receiver.deliveries == []
    [rejected] = receiver.rejected
    assert rejected.reason == "No matching signature found"
    assert rejected.body == BODY.encode()


def test_a_body_changed_after_signing_is_refused(receiver: WebhookReceiver) -> None:
    headers = signed_headers(SECRET)
    assert post(receiver.url, headers, BODY.replace("dep_1", "dep_2")) == 400
    assert receiver.deliveries == []
    assert [r.reason for r in receiver.rejected] == ["No matching signature found"]


def test_a_request_without_signature_headers_is_refused(receiver: WebhookReceiver) -> None:
    assert post(receiver.url, {"Content-Type": "application/json"}) == 400
    assert receiver.deliveries == []
    assert [r.reason for r in receiver.rejected] == ["Missing required headers"]


def test_a_malformed_signature_header_is_refused_not_a_server_error(
    receiver: WebhookReceiver,
) -> None:
    headers = {**signed_headers(SECRET), "webhook-signature": "not-a-signature"}
    assert post(receiver.url, headers) == 400
    assert receiver.deliveries == []
    assert receiver.rejected[0].reason.startswith("malformed request")


def test_a_replayed_old_delivery_is_refused(receiver: WebhookReceiver) -> None:
    old = datetime.now(UTC) - timedelta(minutes=10)
    assert post(receiver.url, signed_headers(SECRET, at=old)) == 400
    assert [r.reason for r in receiver.rejected] == ["Message timestamp too old"]


def test_nothing_verifies_before_a_secret_is_trusted() -> None:
    with WebhookReceiver() as receiver:
        assert post(receiver.url, signed_headers(SECRET)) == 400
        assert "receiver.trust" in receiver.rejected[0].reason
        receiver.trust(SECRET)
        assert post(receiver.url, signed_headers(SECRET)) == 200
        assert len(receiver.deliveries) == 1


def test_any_trusted_secret_verifies(receiver: WebhookReceiver) -> None:
    receiver.trust(OTHER_SECRET)
    assert post(receiver.url, signed_headers(OTHER_SECRET)) == 200
    assert post(receiver.url, signed_headers(SECRET)) == 200
    assert len(receiver.deliveries) == 2


def test_fail_next_answers_the_scripted_status_and_still_records(
    receiver: WebhookReceiver,
) -> None:
    receiver.fail_next(2, status=503)
    statuses = [post(receiver.url, signed_headers(SECRET)) for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert [d.status for d in receiver.deliveries] == [503, 503, 200]
    # The third delivery of the same event is the one with count=3.
    assert receiver.wait_for("treasury.deposit.completed", count=3, timeout=0).status == 200


def test_wait_for_filters_by_type_and_predicate(receiver: WebhookReceiver) -> None:
    other = BODY.replace("deposit", "withdrawal").replace("evt_1", "evt_2")
    assert post(receiver.url, signed_headers(SECRET, other, "evt_2"), other) == 200
    assert post(receiver.url, signed_headers(SECRET)) == 200
    assert receiver.wait_for("treasury.deposit.completed", timeout=0).id == "evt_1"
    assert receiver.wait_for(match=lambda d: d.id == "evt_2", timeout=0).type == (
        "treasury.withdrawal.completed"
    )


def test_wait_for_times_out_saying_what_did_arrive(receiver: WebhookReceiver) -> None:
    assert post(receiver.url, signed_headers(OTHER_SECRET)) == 400
    assert post(receiver.url, signed_headers(SECRET)) == 200
    with pytest.raises(TimeoutError) as raised:
        receiver.wait_for("treasury.transfer.completed", timeout=0.05)
    assert receiver._state.waiting == 0  # no longer counted once it gave up
    message = str(raised.value)
    assert "treasury.transfer.completed" in message
    assert "treasury.deposit.completed" in message  # what did arrive
    assert "No matching signature found" in message  # and what was refused


def test_wait_for_wakes_when_a_delivery_arrives_later(receiver: WebhookReceiver) -> None:
    # The POST starts only once wait_for is inside its wait: the delivery is "later", and it is
    # the record's notification that wakes the waiter.
    statuses: list[int] = []

    def deliver() -> None:
        wait_until_waiting(receiver)
        statuses.append(post(receiver.url, signed_headers(SECRET)))

    sender = threading.Thread(target=deliver)
    sender.start()
    try:
        received = receiver.wait_for("treasury.deposit.completed", timeout=10)
    finally:
        sender.join()
    assert received.id == "evt_1"
    assert statuses == [200]
    assert receiver._state.waiting == 0


async def test_wait_for_async_wakes_without_blocking_the_loop(receiver: WebhookReceiver) -> None:
    waiter = asyncio.create_task(receiver.wait_for_async("treasury.deposit.completed"))
    # Waited for in a thread, while this loop runs the waiter up to its wait.
    await asyncio.to_thread(wait_until_waiting, receiver)
    assert not waiter.done()
    # The POST runs in a thread while this loop keeps running the waiter, which it wakes.
    assert await asyncio.to_thread(post, receiver.url, signed_headers(SECRET)) == 200
    received = await waiter
    assert received.id == "evt_1"
    assert receiver._state.waiting == 0


async def test_wait_for_async_times_out(receiver: WebhookReceiver) -> None:
    with pytest.raises(TimeoutError, match=r"no 1 delivery of treasury\.deposit\.completed"):
        await receiver.wait_for_async("treasury.deposit.completed", timeout=0.05)
    assert receiver._state.waiting == 0


def test_close_stops_listening() -> None:
    receiver = WebhookReceiver()
    url = receiver.url
    receiver.close()
    with pytest.raises(urllib.error.URLError):
        post(url, signed_headers(SECRET))
