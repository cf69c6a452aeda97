"""Log-in POSTs wait their turn on the event loop, before Django gives them
an executor thread (issue 23, finding 8); every other request goes by."""

import asyncio

from storyapp.loginqueue import LoginQueue


def run_requests(settings, requests):
    settings.LOREMASTER_PASSWORD_HASHES_AT_ONCE = 2
    inside, most, order = 0, 0, []

    async def app(scope, receive, send):
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.01 if scope["method"] == "POST" else 0)
        order.append((scope["method"], scope["path"]))
        inside -= 1

    queue = LoginQueue(app)

    async def main():
        await asyncio.gather(*(queue({"type": "http", "method": m, "path": p}, None, None) for m, p in requests))

    asyncio.run(main())
    return most, order


def test_no_more_log_ins_reach_django_at_once_than_the_hash_places(settings):
    most, order = run_requests(settings, [("POST", "/accounts/login/")] * 8 + [("POST", "/admin/login/")] * 4)
    assert most == 2 and len(order) == 12


def test_pages_are_not_held_behind_a_burst_of_log_ins(settings):
    most, order = run_requests(settings, [("POST", "/accounts/login/")] * 6 + [("GET", "/campaigns/")] * 3)
    assert order[:3] == [("GET", "/campaigns/")] * 3  # served while the log-ins wait
