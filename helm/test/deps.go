// Package charttest tests the Helm chart in ../weighstation (make test-helm, make test-k8s);
// docs/operations.md, "How the chart is tested", says what each test proves.
package charttest
