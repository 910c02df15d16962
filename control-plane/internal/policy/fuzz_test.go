package policy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// fuzzFile is the name the fuzzed bytes are loaded under, as `weighstation validate` would load
// a directory holding one file.
const fuzzFile = "dir/fuzz.yaml"

// FuzzParse feeds any bytes, as one policy file, to Parse (what `weighstation validate` and the
// controller call on a directory's files) and checks what the loader promises: it never panics;
// it returns a set or errors, never both or neither; every error names the file (or, for a
// missing GatewayDefaults, the directory) with a line and column inside the input and a field
// path; the errors come in position order; the same bytes always give the same answer; and an
// accepted set keeps the rules validation enforces.
//
// `go test` runs the seeds (the example policies, the package's testdata, the documents the
// other tests use); `make fuzz-long` runs it for FUZZ_EXECS executions.
func FuzzParse(f *testing.F) {
	var all [][]byte
	for _, dir := range []string{"../../../policies", "testdata"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			f.Fatalf("no seeds in %s: %v", dir, err)
		}
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
			if dir == "../../../policies" {
				all = append(all, b)
			}
		}
	}
	// The example directory as one file: a whole, valid set.
	f.Add(bytes.Join(all, []byte("\n---\n")))
	f.Add([]byte(defaultsDoc + "---\n" + acme("    maxMessageBytes: 1MiB\n    rate: { bytesPerSecond: 512KiB }\n")))
	f.Add([]byte(defaultsDoc + "---\n" + acme("    queue: { maxWait: soon }\n    inFlight: 0\n  overrides:\n    - match: { nats: [\"a.>\"] }\n      limits: { inFlight: unlimited }\n")))
	f.Add([]byte("a: [\n"))
	f.Add([]byte("x: &a [*a]\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := Parse("dir", []string{fuzzFile}, map[string][]byte{fuzzFile: b})
		again, errAgain := Parse("dir", []string{fuzzFile}, map[string][]byte{fuzzFile: b})
		if !reflect.DeepEqual(set, again) || !reflect.DeepEqual(err, errAgain) {
			t.Fatalf("two loads of the same bytes differ:\n%v\n%v", err, errAgain)
		}
		if (set == nil) == (err == nil) {
			t.Fatalf("set %v and error %v: exactly one is expected", set, err)
		}
		if err != nil {
			checkErrors(t, b, err)
			return
		}
		checkAccepted(t, set)
	})
}

// lineBreaks counts what YAML reads as a line break (\r\n, \r, \n, NEL, LS, PS): an upper bound
// on the lines before the last. Input with a UTF-16 byte order mark is read as UTF-16.
func lineBreaks(b []byte) int {
	b = asUTF8(b)
	n := bytes.Count(b, []byte("\n")) + bytes.Count(b, []byte("\r")) - bytes.Count(b, []byte("\r\n"))
	for _, nl := range []string{"\u0085", "\u2028", "\u2029"} {
		n += bytes.Count(b, []byte(nl))
	}
	return n
}

// asUTF8 decodes UTF-16 after a byte order mark, as the YAML reader does; other input is left.
func asUTF8(b []byte) []byte {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		order = binary.LittleEndian
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		order = binary.BigEndian
	default:
		return b
	}
	units := make([]uint16, 0, len(b)/2)
	for i := 2; i+1 < len(b); i += 2 {
		units = append(units, order.Uint16(b[i:]))
	}
	return []byte(string(utf16.Decode(units)))
}

func checkErrors(t *testing.T, b []byte, err error) {
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("not a non-empty policy.Errors: %#v", err)
	}
	lines := lineBreaks(b) + 1
	for _, e := range es {
		switch e.Pos.File {
		case fuzzFile:
			if e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Column < 1 {
				t.Errorf("%q: position outside the input's %d lines", e.Error(), lines)
			}
		case "dir":
			if e.Pos.Line != 1 || e.Pos.Column != 1 {
				t.Errorf("%q: a directory error at a position", e.Error())
			}
		default:
			t.Errorf("%q: names neither the file nor the directory", e.Error())
		}
		if e.Field == "" || e.Reason == "" {
			t.Errorf("%q: no field or reason", e.Error())
		}
		prefix := e.Pos.File + ":" + strconv.Itoa(e.Pos.Line) + ":" + strconv.Itoa(e.Pos.Column) + ": " + e.Field + ": "
		if !strings.HasPrefix(e.Error(), prefix) {
			t.Errorf("%q is not FILE:LINE:COL: field: reason", e.Error())
		}
	}
	if !sort.SliceIsSorted(es, func(i, j int) bool {
		a, b := es[i].Pos, es[j].Pos
		return a.File < b.File || a.File == b.File && (a.Line < b.Line || a.Line == b.Line && a.Column < b.Column)
	}) {
		t.Errorf("errors out of position order:\n%v", err)
	}
}

// checkAccepted checks an accepted set against the rules validation enforces.
func checkAccepted(t *testing.T, set *Set) {
	if len(set.Hash) != 64 {
		t.Errorf("hash %q", set.Hash)
	}
	seen := map[string]bool{}
	for i, tn := range set.Tenants {
		name := tn.Policy.Tenant
		if !isDNSLabel(name) || seen[name] {
			t.Errorf("tenant %q: not a DNS label, or twice", name)
		}
		seen[name] = true
		if i > 0 && set.Tenants[i-1].Policy.Tenant >= name {
			t.Errorf("tenants out of order at %q", name)
		}
		if tn.Policy.Scope == ScopeGlobal && set.QuotaService == nil {
			t.Errorf("tenant %q is global without a quota service", name)
		}
		if !tn.Policy.Identify.Set && name != set.DefaultTenant {
			t.Errorf("tenant %q has no identify and is not the default", name)
		}
		checkEffective(t, name, tn.Limits, nil)
		for j, o := range tn.Overrides {
			if len(o.NATS)+len(o.Kafka) == 0 {
				t.Errorf("tenant %q override %d matches nothing", name, j)
			}
			checkEffective(t, name, o.Limits, tn.Limits.MaxMessageBytes)
			if m, tm := o.Limits.MaxMessageBytes, tn.Limits.MaxMessageBytes; m != nil && tm != nil && *m > *tm {
				t.Errorf("tenant %q override %d widens maxMessageBytes: %d > %d", name, j, *m, *tm)
			}
		}
	}
	if !seen[set.DefaultTenant] {
		t.Errorf("default tenant %q has no policy", set.DefaultTenant)
	}
}

// checkEffective checks one tenant's or override's limits; an override that does not narrow
// maxMessageBytes is held to the tenant's (tenantMax).
func checkEffective(t *testing.T, tenant string, e Effective, tenantMax *uint64) {
	for what, v := range map[string]*uint64{
		"maxMessageBytes": e.MaxMessageBytes, "messagesPerSecond": e.MessagesPerSecond, "bytesPerSecond": e.BytesPerSecond,
		"burstMessages": e.BurstMessages, "inFlight": e.InFlight, "connections": e.Connections,
	} {
		if v != nil && *v == 0 {
			t.Errorf("tenant %q: %s is 0", tenant, what)
		}
	}
	maxMsg := e.MaxMessageBytes
	if maxMsg == nil {
		maxMsg = tenantMax
	}
	if e.BurstBytes != nil && (maxMsg == nil || *e.BurstBytes < *maxMsg) {
		t.Errorf("tenant %q: burstBytes %d cannot hold one message of maxMessageBytes", tenant, *e.BurstBytes)
	}
}
