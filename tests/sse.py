"""Reading a server-sent event stream in a test: the Django test client's
async streaming response, collected whole and split into its events."""

from asgiref.sync import async_to_sync


async def _collect(stream) -> bytes:
    return b"".join([chunk async for chunk in stream])


def body(response) -> str:
    """The whole stream of a streaming response, as text."""
    return async_to_sync(_collect)(response.streaming_content).decode()


def events(client, url, **headers) -> list[tuple[str, str, str]]:
    """(event, id, data) of each event the stream at `url` sends."""
    found = []
    for block in body(client.get(url, **headers)).split("\n\n"):
        fields = {"event": "", "id": "", "data": []}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name == "data":
                fields["data"].append(value)
            elif name in ("event", "id"):
                fields[name] = value
        if fields["event"]:
            found.append((fields["event"], fields["id"], "\n".join(fields["data"])))
    return found
