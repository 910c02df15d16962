package main

import (
	"encoding/binary"
	"hash/crc32"
)

// Offsets in a Kafka record batch (message format v2): base offset (8) and batch length (4)
// frame it, then come the partition leader epoch (4), the magic byte and the CRC-32C of
// everything after the CRC.
const (
	batchFramingBytes = 12
	batchCRCOffset    = 17
	batchCRCFrom      = batchCRCOffset + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordBatch is one uncompressed record batch (magic 2) of `records` records whose values are
// `size` bytes each, with no key and no headers, stamped at timestamp (milliseconds). It is what
// a producer without idempotence sends (producer id and sequence -1), so the broker accepts
// the same batch again and again; the CRC is checked by the broker (CORRUPT_MESSAGE otherwise).
func recordBatch(records, size int, timestamp int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, 0)               // base offset
	b = binary.BigEndian.AppendUint32(b, 0)                  // batch length, set below
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)         // partition leader epoch: -1
	b = append(b, 2)                                         // magic
	b = binary.BigEndian.AppendUint32(b, 0)                  // CRC, set below
	b = binary.BigEndian.AppendUint16(b, 0)                  // attributes: no compression, create time
	b = binary.BigEndian.AppendUint32(b, uint32(records-1))  // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(timestamp))  // base timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(timestamp))  // max timestamp
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff) // producer id: -1
	b = binary.BigEndian.AppendUint16(b, 0xffff)             // producer epoch: -1
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)         // base sequence: -1
	b = binary.BigEndian.AppendUint32(b, uint32(records))    // record count
	value := make([]byte, size)
	var record []byte
	for i := range records {
		record = record[:0]
		record = append(record, 0)                        // attributes
		record = binary.AppendVarint(record, 0)           // timestamp delta
		record = binary.AppendVarint(record, int64(i))    // offset delta
		record = binary.AppendVarint(record, -1)          // key: null
		record = binary.AppendVarint(record, int64(size)) // value length
		record = append(record, value...)                 // value
		record = binary.AppendVarint(record, 0)           // headers
		b = binary.AppendVarint(b, int64(len(record)))    // record length (zigzag varint, as Kafka's)
		b = append(b, record...)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-batchFramingBytes))
	binary.BigEndian.PutUint32(b[batchCRCOffset:], crc32.Checksum(b[batchCRCFrom:], castagnoli))
	return b
}
