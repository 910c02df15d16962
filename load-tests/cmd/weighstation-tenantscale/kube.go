package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/kubeapi"
	"github.com/weighstation/weighstation/load-tests/internal/localstack"
)

// With -source kubernetes the policies are LimitPolicy objects of a real kube-apiserver (and
// etcd), which the control plane watches (--policy-source=kubernetes): the platform's defaults
// and default tenant in platformNS, the N tenants' policies in tenantNS, let in by one grant.
const (
	platformNS = "weighstation"
	tenantNS   = "tenants"
)

const kubeDefaults = `apiVersion: v1
kind: Namespace
metadata: { name: ` + platformNS + ` }
---
apiVersion: v1
kind: Namespace
metadata: { name: ` + tenantNS + ` }
---
apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: { name: default }
spec:
  defaultTenant: anonymous
  grants:
    - namespaces: [` + tenantNS + `]
      tenants: ["t*"]
      identities: { natsUsers: ["t*"] }
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: anonymous, namespace: ` + platformNS + ` }
spec:
  tenant: anonymous
`

// kubePolicy is tenant i's LimitPolicy object: policy's, in tenantNS.
func kubePolicy(i, perSecond int) string {
	return strings.Replace(policy(i, perSecond), fmt.Sprintf("metadata: { name: t%d }", i),
		fmt.Sprintf("metadata: { name: t%d, namespace: %s }", i, tenantNS), 1)
}

type kubeSource struct {
	api *kubeapi.Server
	dir string
}

// startKube starts etcd and kube-apiserver, installs the chart's CRDs and creates the platform's
// objects and the N LimitPolicies with one kubectl apply (timed into r.created).
func startKube(root string, n int, r *rung) (*kubeSource, error) {
	dir, err := os.MkdirTemp("", "weighstation-tenantscale-kube-")
	if err != nil {
		return nil, err
	}
	api, err := kubeapi.Start(dir, filepath.Join(root, ".tools", "bin"), filepath.Join(root, ".tools", "k8s", "bin"))
	if err != nil {
		return nil, err
	}
	k := &kubeSource{api: api, dir: dir}
	ctx := context.Background()
	if _, err := api.Kubectl(ctx, "", "apply", "-f", filepath.Join(root, "helm", "weighstation", "files", "crds")); err != nil {
		k.stop()
		return nil, err
	}
	if _, err := api.Kubectl(ctx, "", "wait", "--for", "condition=Established", "--timeout", "60s", "crd/limitpolicies.weighstation.io", "crd/gatewaydefaults.weighstation.io"); err != nil {
		k.stop()
		return nil, err
	}
	if _, err := api.Kubectl(ctx, kubeDefaults, "apply", "-f", "-"); err != nil {
		k.stop()
		return nil, err
	}
	all := filepath.Join(dir, "limitpolicies.yaml")
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(kubePolicy(i, 1000))
	}
	if err := os.WriteFile(all, []byte(b.String()), 0o644); err != nil {
		k.stop()
		return nil, err
	}
	start := time.Now()
	if _, err := api.Kubectl(ctx, "", "apply", "-f", all); err != nil {
		k.stop()
		return nil, err
	}
	r.created = time.Since(start)
	fmt.Fprintf(os.Stderr, "  kubectl apply of %d LimitPolicies: %s\n", n, r.created.Round(time.Millisecond))
	return k, nil
}

// change applies the measured tenant's object with kubectl; the change is made when kubectl
// returns.
func (k *kubeSource) change(_ *localstack.Stack, perSecond int) (time.Time, error) {
	_, err := k.api.Kubectl(context.Background(), kubePolicy(0, perSecond), "apply", "-f", "-")
	return time.Now(), err
}

// statusWritten waits until every LimitPolicy's status is current (observedGeneration of its
// generation, Programmed True) and no idle tenant's object (all but the measured one) was
// written in the last quietFor (an idle tenant's gets no usage). It returns how long after the control
// plane's start the conditions were first seen current on all (polled every 10 s), and the last
// of the N tenants' objects (but the measured one, changed since) had its status written: the
// time of the control plane's status update in the object's managedFields (to the second).
func (k *kubeSource) statusWritten(cpStart time.Time, n int) (conditions, all time.Duration, err error) {
	type condition struct{ Type, Status string }
	var list struct {
		Items []struct {
			Metadata struct {
				Name          string `json:"name"`
				Generation    int64  `json:"generation"`
				ManagedFields []struct {
					Manager     string    `json:"manager"`
					Subresource string    `json:"subresource"`
					Time        time.Time `json:"time"`
				} `json:"managedFields"`
			} `json:"metadata"`
			Status struct {
				ObservedGeneration int64          `json:"observedGeneration"`
				Conditions         []condition    `json:"conditions"`
				Usage              map[string]any `json:"usage"`
			} `json:"status"`
		} `json:"items"`
	}
	const timeout, quietFor = 30 * time.Minute, 15 * time.Second
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Second) {
		list.Items = nil
		if err := k.api.Get("/apis/weighstation.io/v1alpha1/namespaces/"+tenantNS+"/limitpolicies", &list); err != nil {
			return 0, 0, err
		}
		current, withUsage, last := 0, 0, time.Time{}
		for _, it := range list.Items {
			programmed := false
			for _, c := range it.Status.Conditions {
				programmed = programmed || c.Type == "Programmed" && c.Status == "True"
			}
			if it.Status.Usage != nil {
				withUsage++
			}
			if it.Status.ObservedGeneration == it.Metadata.Generation && programmed {
				current++
			}
			if it.Metadata.Name == measured {
				continue
			}
			for _, m := range it.Metadata.ManagedFields {
				if m.Manager == "weighstation" && m.Subresource == "status" && m.Time.After(last) {
					last = m.Time
				}
			}
		}
		since := time.Since(cpStart)
		fmt.Fprintf(os.Stderr, "    %s after the control plane's start: conditions current on %d of %d LimitPolicies, usage on %d\n",
			since.Round(time.Second), current, n, withUsage)
		if current == n && conditions == 0 {
			conditions = since
		}
		if current == n && time.Since(last) > quietFor {
			return conditions, last.Sub(cpStart), nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("status current on %d of %d LimitPolicies, usage on %d, %s after the changes", current, n, withUsage, timeout)
		}
	}
}

func (k *kubeSource) stop() {
	k.api.Stop()
	_ = os.RemoveAll(k.dir)
}
