package localstack

import (
	"encoding/base64"
	"testing"
)

// Kafka's StorageTool rejects a cluster id it parses as an option: with 1 in 64 ids starting
// with '-', a few thousand draws would find one.
func TestRandomClusterIDIsAnArgumentKafkaAccepts(t *testing.T) {
	for i := 0; i < 5000; i++ {
		id := randomClusterID()
		if id[0] == '-' {
			t.Fatalf("cluster id %q starts with '-'", id)
		}
		if b, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("cluster id %q is not 16 bytes of base64url: %v", id, err)
		}
	}
}
