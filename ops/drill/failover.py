"""The cluster drill's HTTP client: a party's requests go to its preferred gateway; when a gateway gives no
answer at all (refused, reset, timed out: the outcome is unknown) the next request goes to the next gateway,
and the scenario runner retries the exact body there. `base_urls` is the deployment's list, which a
restarted gateway's new address replaces in place."""
from __future__ import annotations

from scenarios import HttpTransport, TransportError
from scenarios.client import Answer


class GatewayFailover:
    def __init__(self, base_urls: list[str], *, prefer: int, timeout: float = 10.0) -> None:
        self.base_urls, self.prefer, self.current, self.timeout = base_urls, prefer, prefer, timeout
        self.failovers = 0
        self._clients: dict[str, HttpTransport] = {}

    def _client(self) -> HttpTransport:
        url = self.base_urls[self.current]
        if url not in self._clients:
            self._clients[url] = HttpTransport(url, timeout=self.timeout)
        return self._clients[url]

    async def request(self, method: str, path: str, token: str, raw: bytes | None = None,
                      headers: dict[str, str] | None = None) -> Answer:
        try:
            return await self._client().request(method, path, token, raw, headers)
        except TransportError:
            self.current = (self.current + 1) % len(self.base_urls)
            self.failovers += 1
            raise

    def prefer_again(self) -> None:
        """Back to the preferred gateway (it was restarted)."""
        self.current = self.prefer

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
