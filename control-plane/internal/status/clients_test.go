package status

import (
	"strings"
	"testing"

	"github.com/weighstation/weighstation/control-plane/internal/usage"
)

// A client.id may hold quotes, backslashes and newlines: the exposition stays one sample a line.
func TestClientMetricsEscapeTheClientsName(t *testing.T) {
	var b strings.Builder
	writeClientMetrics(&b, []usage.ClientRate{{Protocol: "kafka", Tenant: "billing", Client: "a\"b\\c\nd", MessagesPerSecond: 1.5}})
	want := `weighstation_client_messages_per_second{protocol="kafka",tenant="billing",client="a\"b\\c\nd"} 1.5`
	if !strings.Contains(b.String(), want+"\n") {
		t.Errorf("exposition:\n%s\nwant the line %s", b.String(), want)
	}
}
