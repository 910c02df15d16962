package main

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A batch decodes, with franz-go's decoder, to what was asked for, and carries the CRC-32C
// (Castagnoli, not IEEE) of everything after its CRC field.
func TestRecordBatchDecodesWithItsCRC(t *testing.T) {
	for _, tc := range []struct{ records, size int }{
		{1, 100}, {100, 100}, {1000, 100}, {1, 1024}, {1, 16 << 10}, {1, 64 << 10}, {3, 0},
	} {
		b := recordBatch(tc.records, tc.size, 1_700_000_000_000)
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(b); err != nil {
			t.Fatalf("%d × %d B: %v", tc.records, tc.size, err)
		}
		if batch.Magic != 2 || batch.Attributes != 0 || batch.ProducerID != -1 || batch.PartitionLeaderEpoch != -1 {
			t.Errorf("%d × %d B: header %+v", tc.records, tc.size, batch)
		}
		if int(batch.Length) != len(b)-12 || int(batch.NumRecords) != tc.records || int(batch.LastOffsetDelta) != tc.records-1 {
			t.Errorf("%d × %d B: length %d of %d bytes, %d records, last offset delta %d", tc.records, tc.size,
				batch.Length, len(b), batch.NumRecords, batch.LastOffsetDelta)
		}
		if want := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(batch.CRC) != want {
			t.Errorf("%d × %d B: CRC %08x, want %08x", tc.records, tc.size, uint32(batch.CRC), want)
		}
		rest := batch.Records
		for i := range tc.records {
			var r kmsg.Record
			if err := r.ReadFrom(rest); err != nil {
				t.Fatalf("%d × %d B: record %d: %v", tc.records, tc.size, i, err)
			}
			if int(r.OffsetDelta) != i || len(r.Value) != tc.size || r.Key != nil || len(r.Headers) != 0 {
				t.Fatalf("%d × %d B: record %d: %+v", tc.records, tc.size, i, r)
			}
			rest = rest[len(binary.AppendVarint(nil, int64(r.Length)))+int(r.Length):]
		}
		if len(rest) != 0 {
			t.Errorf("%d × %d B: %d bytes after the last record", tc.records, tc.size, len(rest))
		}
	}
}
