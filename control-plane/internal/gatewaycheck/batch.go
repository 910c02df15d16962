package gatewaycheck

import (
	"encoding/binary"
	"hash/crc32"
	"time"
)

// OneRecordBatch is a RecordBatch v2 of one record with value, no key, no producer id, stamped at.
func OneRecordBatch(value []byte, at time.Time) []byte {
	var rec []byte
	rec = append(rec, 0)                              // attributes
	rec = binary.AppendVarint(rec, 0)                 // timestamp delta
	rec = binary.AppendVarint(rec, 0)                 // offset delta
	rec = binary.AppendVarint(rec, -1)                // null key
	rec = binary.AppendVarint(rec, int64(len(value))) // value
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // no headers
	records := binary.AppendVarint(nil, int64(len(rec)))
	records = append(records, rec...)

	ms := uint64(at.UnixMilli())
	var tail []byte                                        // from attributes on: what the CRC covers
	tail = binary.BigEndian.AppendUint16(tail, 0)          // attributes
	tail = binary.BigEndian.AppendUint32(tail, 0)          // last offset delta
	tail = binary.BigEndian.AppendUint64(tail, ms)         // first timestamp
	tail = binary.BigEndian.AppendUint64(tail, ms)         // max timestamp
	tail = binary.BigEndian.AppendUint64(tail, ^uint64(0)) // producer id -1
	tail = binary.BigEndian.AppendUint16(tail, ^uint16(0)) // producer epoch -1
	tail = binary.BigEndian.AppendUint32(tail, ^uint32(0)) // base sequence -1
	tail = binary.BigEndian.AppendUint32(tail, 1)          // records
	tail = append(tail, records...)

	var b []byte
	b = binary.BigEndian.AppendUint64(b, 0)                       // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(4+1+4+len(tail))) // batch length: from leader epoch on
	b = binary.BigEndian.AppendUint32(b, ^uint32(0))              // partition leader epoch -1
	b = append(b, 2)                                              // magic
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(tail, crc32.MakeTable(crc32.Castagnoli)))
	return append(b, tail...)
}
