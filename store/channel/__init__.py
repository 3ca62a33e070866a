"""The channel: moving messages between queue managers over TCP (docs/design.md#store-and-forward, docs/protocol.md).

- `frames`    — length-prefixed frames and their strict incremental decoder
- `handshake` — version negotiation and mutual HMAC-SHA256 challenge-response with the link's
                pre-shared key; the session key that seals every later frame
- `batches`   — BATCH and ACK bodies, sealed and opened with the session
- `wire`      — reading and writing frames on asyncio streams with bounded waits
- `listener`  — `mqcli listen`: accept, authenticate, store each batch, ack after the commit
- `dispatcher`— `mqcli dispatch`: take from outgoing queues, send, remove on ack

The protocol is written down in docs/protocol.md. Standard library only (asyncio, hmac,
hashlib, secrets). Imported lazily: `mqcli put` never loads it.
"""
