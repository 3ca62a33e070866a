"""Frames on asyncio streams, with every wait bounded (docs/protocol.md §5).

`Connection.read_frame` feeds the strict `FrameDecoder` chunk by chunk: a frame header is
checked (type, length against the current limit) as soon as its five bytes are in, before the
payload is read. Two clocks bound a read: the idle timeout while no frame has started, and
the frame timeout from a frame's first byte to its last (a peer trickling one byte at a time
cannot hold a connection open).

Every bound is `asyncio.timeout`, never `asyncio.wait_for`: on Python 3.11, wait_for returns
the result when a cancellation comes in the same loop turn as the result, so a task told to
stop (a dispatcher on SIGTERM, a listener shutting down) went on waiting for its next frame.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Sequence

from ..errors import (
    AuthenticationFailed, BadData, ChannelError, ChannelTimeout, ConnectionLost, FrameTooLarge, PeerError,
    ProtocolError, StoreError, VersionMismatch,
)
from .frames import DEFAULT_MAX_FRAME, ErrorCode, Frame, FrameDecoder, FrameType, decode_error, encode_error

CHUNK = 256 * 1024
#: StreamReader buffer limit: the transport pauses reading above twice this, so a listener
#: busy committing one batch still takes in the next one.
STREAM_LIMIT = 4 * 1024 * 1024


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 max_frame: int = DEFAULT_MAX_FRAME, frame_timeout: float = 30.0,
                 write_timeout: float = 30.0) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder(max_frame)
        self.frame_timeout = frame_timeout
        self.write_timeout = write_timeout
        self._frames: deque[Frame] = deque()
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.bytes_in = 0

    async def read_frame(self, idle_timeout: float | None) -> Frame | None:
        """The next frame, or None when the peer closed between frames. Raises ChannelTimeout,
        ConnectionLost, or the decoder's ProtocolError (TruncatedFrame if it closed inside one)."""
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while not self._frames:
            if self.decoder.pending:
                if deadline is None:
                    deadline = loop.time() + self.frame_timeout
                timeout: float | None = max(0.0, deadline - loop.time())
            else:
                timeout = idle_timeout
            try:
                async with asyncio.timeout(timeout):
                    data = await self.reader.read(CHUNK)
            except TimeoutError:
                if self.decoder.pending:
                    raise ChannelTimeout(f"{self.peer} sent part of a frame and then nothing for "
                                         f"{self.frame_timeout:g}s") from None
                raise ChannelTimeout(f"{self.peer} sent nothing for {idle_timeout:g}s") from None
            except (ConnectionError, OSError) as exc:
                raise ConnectionLost(f"the connection to {self.peer} broke: {exc}") from None
            if not data:
                self.decoder.eof()
                return None
            self.bytes_in += len(data)
            self._frames.extend(self.decoder.feed(data))
        return self._frames.popleft()

    async def expect(self, types: Sequence[FrameType], idle_timeout: float | None, what: str) -> Frame:
        """The next frame, which must be one of `types`; an ERROR frame raises PeerError, the
        end of the stream ConnectionLost."""
        frame = await self.read_frame(idle_timeout)
        if frame is None:
            raise ConnectionLost(f"{self.peer} closed the connection while {what}")
        if frame.type == FrameType.ERROR and FrameType.ERROR not in types:
            raise PeerError(*decode_error(frame.payload))
        if frame.type not in types:
            raise ProtocolError(f"{self.peer} sent {frame.type.name} while {what}")
        return frame

    async def send(self, parts: Iterable[bytes]) -> None:
        try:
            for part in parts:
                self.writer.write(part)
            async with asyncio.timeout(self.write_timeout):
                await self.writer.drain()
        except TimeoutError:
            raise ChannelTimeout(f"{self.peer} did not take our data for {self.write_timeout:g}s") from None
        except (ConnectionError, OSError) as exc:
            raise ConnectionLost(f"the connection to {self.peer} broke: {exc}") from None

    async def send_error(self, code: ErrorCode, text: str) -> None:
        """Best effort: tell the peer why we close (it may be gone already)."""
        try:
            self.writer.write(encode_error(code, text))
            async with asyncio.timeout(2.0):
                await self.writer.drain()
        except (TimeoutError, ConnectionError, OSError):
            pass

    async def linger(self, seconds: float = 2.0) -> None:
        """After an ERROR: our side half-closed, what the peer still sends (a batch already on
        the wire) read and dropped until it closes too, for up to `seconds`. Closing with unread
        data makes the kernel reset the connection, and a reset can reach the peer before it
        has read the ERROR: it would see "connection lost", not why."""
        try:
            if self.writer.can_write_eof():
                self.writer.write_eof()
            async with asyncio.timeout(seconds):
                while await self.reader.read(STREAM_LIMIT):
                    pass
        except (TimeoutError, ConnectionError, OSError):
            pass

    async def close(self) -> None:
        """Close, flushing what is buffered for up to 2 s; a peer that does not read by then is
        cut off (a transport with unsent data would otherwise stay open)."""
        try:
            self.writer.close()
            async with asyncio.timeout(2.0):
                await self.writer.wait_closed()
        except (TimeoutError, ConnectionError, OSError):
            self.abort()

    def abort(self) -> None:
        transport = self.writer.transport
        if transport is not None:
            transport.abort()


def error_code_for(exc: BaseException) -> ErrorCode:
    """What ERROR code tells a peer why we refuse it."""
    if isinstance(exc, AuthenticationFailed):
        return ErrorCode.AUTHENTICATION
    if isinstance(exc, VersionMismatch):
        return ErrorCode.VERSION
    if isinstance(exc, FrameTooLarge):
        return ErrorCode.TOO_LARGE
    if isinstance(exc, ProtocolError):
        return ErrorCode.PROTOCOL
    if isinstance(exc, BadData):
        return ErrorCode.BAD_DATA
    if isinstance(exc, StoreError) and not isinstance(exc, ChannelError):
        return ErrorCode.STORE
    return ErrorCode.PROTOCOL
