package cluster

import "testing"

// The transcript is what a user types: paths of the setup's files as $MANIFESTS, the repository's
// relative, and only the commands that change something (the quick start lists those).
func TestTranscriptIsWhatAUserTypes(t *testing.T) {
	k := &Kube{Root: "/repo", Manifests: "/tmp/run/manifests"}
	for _, c := range []struct {
		name string
		args []string
		want string // "" when not recorded
	}{
		{"kubectl", []string{"apply", "-f", "/tmp/run/manifests/nats.yaml"}, "kubectl apply -f $MANIFESTS/nats.yaml"},
		{"kubectl", []string{"--as", "alice@team-a", "apply", "-f", "/tmp/run/manifests/team-a.yaml"}, "kubectl --as alice@team-a apply -f $MANIFESTS/team-a.yaml"},
		{"kubectl", []string{"-n", "weighstation", "rollout", "status", "deployment/x"}, "kubectl -n weighstation rollout status deployment/x"},
		{"kubectl", []string{"-n", "nats", "get", "pods"}, ""},
		{"kubectl", []string{"-n", "team-a", "logs", "client"}, ""},
		{"helm", []string{"install", "ws", "/repo/helm/weighstation", "-f", "/tmp/run/manifests/values.yaml"}, "helm install ws helm/weighstation -f $MANIFESTS/values.yaml"},
	} {
		before := len(k.Transcript)
		if c.name == "helm" || recorded(c.args) {
			k.record(c.name, c.args)
		}
		switch got := k.Transcript[before:]; {
		case c.want == "" && len(got) != 0:
			t.Errorf("%s %v recorded as %q: it changes nothing", c.name, c.args, got)
		case c.want != "" && (len(got) != 1 || got[0] != c.want):
			t.Errorf("%s %v recorded as %q, want %q", c.name, c.args, got, c.want)
		}
	}
}
