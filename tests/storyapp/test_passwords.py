"""Password hashes take turns (issue 23, finding 8): a burst of log-ins
waits for a few hashing slots instead of taking every core from the readers
who are playing, and none is refused for it."""

import threading
import time

from storyapp import passwords


def test_no_more_hashes_run_at_once_than_the_slots_and_all_of_them_run(settings, monkeypatch):
    settings.LOREMASTER_PASSWORD_HASHES_AT_ONCE = 2
    monkeypatch.setattr(passwords, "_slots", None)
    running, most, done = 0, 0, []
    lock = threading.Lock()

    def hash_one():
        nonlocal running, most
        with passwords.hashing():
            with lock:
                running += 1
                most = max(most, running)
            time.sleep(0.02)
            with lock:
                running -= 1
        done.append(True)

    threads = [threading.Thread(target=hash_one) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 2
    assert len(done) == 12
