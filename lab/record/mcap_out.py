"""A chunked, indexed MCAP writer made for many small messages (the recording writer process's file).

The ``mcap`` package's :class:`mcap.writer.Writer` spends a record object and a few dozen Python calls on each
message: at 25 Hz x 7 topics, most of the writer process's time. :class:`McapOut` packs a message record with
one ``struct`` call into the open chunk and keeps its index entry in a list; every other record (header,
schemas, channels, attachments, metadata, chunks, message indexes, data end, summary with statistics and
indexes, summary offsets, footer) is the ``mcap`` package's own record class, laid out in the file as its
Writer lays it out (schemas and channels before the first chunk, outside it, so a file cut short still reads
linearly). Chunks are zstd at :data:`ZSTD_LEVEL` with their CRC.

The calls are the Writer's: ``start``, ``register_schema``, ``register_channel``, ``add_attachment``,
``add_metadata``, ``add_message``, ``finish``; ``stream`` needs ``write`` and ``tell``.
"""

import struct
import zlib

import zstandard
from mcap.data_stream import RecordBuilder
from mcap.opcode import Opcode
from mcap.records import (
    Attachment,
    AttachmentIndex,
    Channel,
    Chunk,
    ChunkIndex,
    DataEnd,
    Footer,
    Header,
    MessageIndex,
    Metadata,
    MetadataIndex,
    Schema,
    Statistics,
    SummaryOffset,
)
from mcap.writer import MCAP0_MAGIC

ZSTD_LEVEL = 1  # zstd's fastest: a little larger than level 3, half the time
_MESSAGE = struct.Struct("<BQHIQQ")  # opcode, record length, channel id, sequence, log time, publish time [ns]
_MESSAGE_FIXED = 2 + 4 + 8 + 8  # the record's length without its data


class McapOut:
    """One MCAP file written to ``stream``, chunks of about ``chunk_bytes`` uncompressed bytes."""

    def __init__(self, stream, chunk_bytes: int):
        self.stream = stream
        self.chunk_bytes = chunk_bytes
        self._zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self.schemas: dict = {}
        self.channels: dict = {}
        self._chunk = bytearray()  # the message records of the open chunk
        self._index: dict = {}  # channel id -> [(log time, offset in the chunk)] of the open chunk
        self._span = None  # [first, last] log time [ns] of the open chunk
        self._chunk_indexes: list = []
        self._attachment_indexes: list = []
        self._metadata_indexes: list = []
        self._counts: dict = {}  # channel id -> messages
        self._time = None  # [first, last] log time [ns] of the file

    # ---- the data section ----------------------------------------------------------------------------
    def _records(self, *records) -> int:
        """Write ``records`` now (outside any chunk); where the first began."""
        b = RecordBuilder()
        for r in records:
            r.write(b)
        at = self.stream.tell()
        self.stream.write(b.end())
        return at

    def start(self, profile: str, library: str) -> None:
        self.stream.write(MCAP0_MAGIC)
        self._records(Header(profile=profile, library=library))

    def register_schema(self, name: str, encoding: str, data: bytes) -> int:
        sid = len(self.schemas) + 1
        self.schemas[sid] = Schema(id=sid, name=name, encoding=encoding, data=data)
        self._records(self.schemas[sid])
        return sid

    def register_channel(self, topic: str, message_encoding: str, schema_id: int, metadata: dict | None = None) -> int:
        cid = len(self.channels) + 1
        self.channels[cid] = Channel(
            id=cid, topic=topic, message_encoding=message_encoding, schema_id=schema_id, metadata=metadata or {}
        )
        self._counts[cid] = 0
        self._records(self.channels[cid])
        return cid

    def add_attachment(self, create_time: int, log_time: int, name: str, media_type: str, data: bytes) -> None:
        b = RecordBuilder()
        Attachment(create_time=create_time, log_time=log_time, name=name, media_type=media_type, data=data).write(b)
        raw = b.end()
        at = self.stream.tell()
        self.stream.write(raw)
        self._attachment_indexes.append(
            AttachmentIndex(
                offset=at,
                length=len(raw),
                log_time=log_time,
                create_time=create_time,
                data_size=len(data),
                name=name,
                media_type=media_type,
            )
        )

    def add_metadata(self, name: str, data: dict) -> None:
        b = RecordBuilder()
        Metadata(name=name, metadata=data).write(b)
        raw = b.end()
        at = self.stream.tell()
        self.stream.write(raw)
        self._metadata_indexes.append(MetadataIndex(offset=at, length=len(raw), name=name))

    def add_message(self, channel_id: int, log_time: int, data: bytes, publish_time: int, sequence: int = 0) -> None:
        """One message into the open chunk (the chunk is written once it holds ``chunk_bytes``)."""
        c = self._chunk
        span = self._span
        if span is None:
            self._span = [log_time, log_time]
        elif log_time < span[0]:
            span[0] = log_time
        elif log_time > span[1]:
            span[1] = log_time
        index = self._index.get(channel_id)
        if index is None:
            index = self._index[channel_id] = []
        index.append((log_time, len(c)))
        c += _MESSAGE.pack(Opcode.MESSAGE, _MESSAGE_FIXED + len(data), channel_id, sequence, log_time, publish_time)
        c += data
        self._counts[channel_id] += 1
        if len(c) >= self.chunk_bytes:
            self._write_chunk()

    def _write_chunk(self) -> None:
        """The open chunk (compressed) and its message indexes, in one write."""
        if self._span is None:
            return
        raw = bytes(self._chunk)
        packed = self._zstd.compress(raw)
        t0, t1 = self._span
        b = RecordBuilder()
        Chunk(
            compression="zstd",
            data=packed,
            message_start_time=t0,
            message_end_time=t1,
            uncompressed_crc=zlib.crc32(raw),
            uncompressed_size=len(raw),
        ).write(b)
        chunk_length = b.count
        at = self.stream.tell()
        offsets = {}
        for cid, records in self._index.items():
            offsets[cid] = at + b.count
            MessageIndex(channel_id=cid, records=records).write(b)
        out = b.end()
        self.stream.write(out)
        self._chunk_indexes.append(
            ChunkIndex(
                message_start_time=t0,
                message_end_time=t1,
                chunk_start_offset=at,
                chunk_length=chunk_length,
                message_index_offsets=offsets,
                message_index_length=len(out) - chunk_length,
                compression="zstd",
                compressed_size=len(packed),
                uncompressed_size=len(raw),
            )
        )
        self._time = [t0, t1] if self._time is None else [min(self._time[0], t0), max(self._time[1], t1)]
        self._chunk = bytearray()
        self._index = {}
        self._span = None

    # ---- the end -------------------------------------------------------------------------------------
    def finish(self) -> None:
        """The last chunk, the data end, the summary (schemas, channels, statistics, chunk, attachment and
        metadata indexes), its offsets, the footer and the closing magic."""
        self._write_chunk()
        self._records(DataEnd(data_section_crc=0))
        t0, t1 = self._time or (0, 0)
        statistics = Statistics(
            message_count=sum(self._counts.values()),
            schema_count=len(self.schemas),
            channel_count=len(self.channels),
            attachment_count=len(self._attachment_indexes),
            metadata_count=len(self._metadata_indexes),
            chunk_count=len(self._chunk_indexes),
            message_start_time=t0,
            message_end_time=t1,
            channel_message_counts=dict(self._counts),
        )
        groups = [
            (Opcode.SCHEMA, list(self.schemas.values())),
            (Opcode.CHANNEL, list(self.channels.values())),
            (Opcode.STATISTICS, [statistics]),
            (Opcode.CHUNK_INDEX, self._chunk_indexes),
            (Opcode.ATTACHMENT_INDEX, self._attachment_indexes),
            (Opcode.METADATA_INDEX, self._metadata_indexes),
        ]
        start = self.stream.tell()
        b = RecordBuilder()
        offsets = []
        for opcode, records in groups:
            group_start = b.count
            for r in records:
                r.write(b)
            offsets.append(
                SummaryOffset(group_opcode=opcode, group_start=start + group_start, group_length=b.count - group_start)
            )
        offset_start = start + b.count
        for o in offsets:
            o.write(b)
        summary = b.end()
        crc = zlib.crc32(struct.pack("<BQQQ", Opcode.FOOTER, 8 + 8 + 4, start, offset_start), zlib.crc32(summary))
        self.stream.write(summary)
        self._records(Footer(summary_start=start, summary_offset_start=offset_start, summary_crc=crc))
        self.stream.write(MCAP0_MAGIC)
