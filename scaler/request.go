package scaler

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/audit"
)

// permanentError is an error that another attempt cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// read returns the resource of j through reader, with opts; nil for a missing optional one, a
// permanent error for a missing required one.
func (s *Scaler) read(ctx context.Context, reader client.Reader, j job, opts ...client.GetOption) (client.Object, error) {
	obj, err := newObject(j.info.Ref)
	if err != nil {
		return nil, permanentError{err}
	}
	err = reader.Get(ctx, j.key(), obj, opts...)
	switch {
	case apierrors.IsNotFound(err) && j.info.Optional:
		j.log.V(1).Info("Optional resource missing, skipping")
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, permanentError{fmt.Errorf("required resource missing: %w", err)}
	case err != nil:
		return nil, fmt.Errorf("reading: %w", err)
	}
	if s.DryRun != nil {
		if err := s.DryRun.Overlay(obj); err != nil {
			return nil, permanentError{err}
		}
	}
	return obj, nil
}

// request sends one request to the API server with send, whose token the caller has taken. The
// request is bounded by what is left until deadline on the clock.
func (s *Scaler) request(ctx context.Context, deadline time.Time, send func(ctx context.Context) error) error {
	left := deadline.Sub(s.clock().Now())
	if left <= 0 {
		return permanentError{fmt.Errorf("no time left of the timeout")}
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	return send(ctx)
}

// guarded returns send guarded by the Guard for a write to a resource of namespace: the write is sent
// only when Guard lets it, under Guard's context, and never once that context has ended, whatever
// the client does with an ended context. A refusal, or a write that Guard's context cut off while
// ctx went on, is an error wrapping ErrRefused. It is asked after the token was taken, right before
// the write, so that no wait comes between the check and the send. A write sent is recorded in the
// Audit. Before the Guard, the verdict the job acts on must still be current (Reason.Current).
func (s *Scaler) guarded(j job, send func(ctx context.Context) error) func(ctx context.Context) error {
	send = s.audited(j, send)
	return func(ctx context.Context) error {
		if j.why.Current != nil && !j.why.Current() {
			supersededWrites.WithLabelValues(j.dir.String()).Inc()
			return fmt.Errorf("%w: the shoot's latest verdict is no longer scale-%s", ErrSuperseded, j.dir)
		}
		if s.Guard == nil {
			return send(ctx)
		}
		writeCtx, cancel, err := s.Guard(ctx, j.namespace)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		defer cancel()
		if err = writeCtx.Err(); err == nil {
			err = send(writeCtx)
		}
		if err != nil && writeCtx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w: the guard's deadline passed: %w", ErrRefused, err)
		}
		return err
	}
}

// audited records the write send makes in the Audit, when there is one: before the request, the
// moment before it is sent, which is after the Guard's check, and its result after the answer. A
// write whose context ended by that moment is not sent, and not recorded.
func (s *Scaler) audited(j job, send func(ctx context.Context) error) func(ctx context.Context) error {
	if s.Audit == nil || s.DryRun != nil {
		return send
	}
	return func(ctx context.Context) error {
		w := audit.Write{Kind: audit.KindScale, Namespace: j.namespace, Object: j.kind() + "/" + j.name(), Sent: s.Audit.Now()}
		if s.Partition != nil {
			w.Partition = s.Partition(j.namespace)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		w = s.Audit.Sending(w)
		err := send(ctx)
		s.Audit.Wrote(w, err)
		return err
	}
}

// patcher returns the write of patch on obj, in a flow of direction dir: sent through Client, or in dry
// run recorded and not sent.
func (s *Scaler) patcher(obj client.Object, patch client.Patch, dir Direction) func(ctx context.Context) error {
	if s.DryRun != nil {
		return func(context.Context) error { return s.DryRun.Patch(obj, patch, dir.String()) }
	}
	return func(ctx context.Context) error { return s.Client.Patch(ctx, obj, patch) }
}

// logRefused logs a write that Guard refused, with the reason. It is neither an Event nor a failure:
// Guard counts the refusals, and the replica that may act finishes the flow.
func logRefused(log logr.Logger, err error) {
	log.Info("Write refused: this replica may not act on the namespace now", "reason", err.Error())
}
