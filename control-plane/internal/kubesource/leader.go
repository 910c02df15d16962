package kubesource

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election is how status writers take turns: one Lease in the platform namespace.
type Election struct {
	LeaseName     string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// elect runs for the Lease until ctx ends; while this replica holds it, it writes status. A
// replica that stops releases the Lease, so its successor writes at once.
func (s *Source) elect(ctx context.Context) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: s.cfg.PlatformNamespace, Name: s.cfg.Election.LeaseName},
		Client:     s.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.cfg.Identity},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   s.cfg.Election.LeaseDuration,
			RenewDeadline:   s.cfg.Election.RenewDeadline,
			RetryPeriod:     s.cfg.Election.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            s.cfg.Election.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					s.cfg.Log.Info("writing policy status: this replica holds the Lease", "lease", s.cfg.Election.LeaseName)
					s.leader.Store(true)
					s.Wake()
				},
				OnStoppedLeading: func() { s.leader.Store(false) },
			},
		})
	}
}
