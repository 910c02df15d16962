package usage

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"
)

// ExportFormats are the formats WriteHistory writes.
var ExportFormats = []string{"csv", "json", "parquet"}

// WriteHistory writes per-minute usage as CSV (a header, then one row per tenant and minute,
// each followed by its busiest clients' rows), JSON lines or Parquet. The client column is last,
// so that a reader of the columns before it reads a client row as one more row of its tenant
// only if it ignores that column: tenant rows have it empty.
func WriteHistory(w io.Writer, format string, rows []Bucket) error {
	switch format {
	case "csv":
		c := csv.NewWriter(w)
		_ = c.Write([]string{"start", "protocol", "tenant", "messages", "bytes", "refused", "delayed", "consumed", "client"})
		for _, r := range rows {
			_ = c.Write([]string{r.Start.Format(time.RFC3339), r.Protocol, r.Tenant,
				strconv.FormatUint(r.Messages, 10), strconv.FormatUint(r.Bytes, 10),
				strconv.FormatUint(r.Refused, 10), strconv.FormatUint(r.Delayed, 10),
				strconv.FormatUint(r.Consumed, 10), r.Client})
		}
		c.Flush()
		return c.Error()
	case "json":
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case "parquet":
		pw := parquet.NewGenericWriter[Bucket](w)
		if _, err := pw.Write(rows); err != nil {
			return err
		}
		return pw.Close()
	}
	return fmt.Errorf("format %q: want csv, json or parquet", format)
}
