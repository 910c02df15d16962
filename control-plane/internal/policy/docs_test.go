package policy

import (
	"os"
	"strings"
	"testing"
)

// The built-in defaults are part of the user's contract: the policy reference must state them.
func TestPolicyReferenceStatesTheBuiltinDefaults(t *testing.T) {
	b, err := os.ReadFile("../../../docs/policy-reference.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	d := BuiltinDefaults
	for _, row := range []string{
		"| `maxMessageBytes` | size | " + sizeText(d.MaxMessageBytes) + " |",
		"| `rate.messagesPerSecond` | count | " + itoa(int(d.MessagesPerSecond)) + " |",
		"| `rate.bytesPerSecond` | size | " + sizeText(d.BytesPerSecond) + " |",
		"| `inFlight` | count | " + itoa(int(d.InFlight)) + " |",
		"| `queue.maxMessages` | count | " + itoa(int(d.QueueMaxMessages)) + " |",
		"| `queue.maxWait` | duration | " + d.QueueMaxWait.String() + " |",
		"| `connections` | count | " + itoa(int(d.Connections)) + " |",
		"| `consume.bytesPerSecond` | size | " + sizeText(d.ConsumeBytesPerSecond) + " |",
		"| `consume.messagesPerSecond` | count | " + itoa(int(d.ConsumeMessagesPerSecond)) + " |",
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("docs/policy-reference.md lacks the row %q", row)
		}
	}
}

func sizeText(v uint64) string {
	for _, u := range sizeSuffixes {
		if v%u.factor == 0 {
			return itoa(int(v/u.factor)) + u.suffix
		}
	}
	return itoa(int(v))
}
