package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
)

// job is one run of a named background job.
type job struct {
	Name     string
	Duration time.Duration
}

// jobResult is what a finished run reports.
type jobResult struct {
	Job        string    `json:"job"`
	Lock       string    `json:"lock"`
	Fence      int64     `json:"fence"`
	Steps      int       `json:"steps"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// jobSteps is how many checkpoints a run makes.
const jobSteps = 4

// job does the work of a run, holding the job's lock (see newServer: it is
// wrapped by decorator.WithLock). ctx is cancelled if the lock is lost.
func (s *server) job(ctx context.Context, j job) (jobResult, error) {
	lk := padlock.FromContext(ctx)
	res := jobResult{Job: j.Name, Lock: lk.Key(), Fence: lk.Fence(), StartedAt: time.Now().UTC()}
	s.logger.Info("job started", "job", j.Name, "fence", res.Fence, "for", j.Duration)
	t := time.NewTimer(j.Duration / jobSteps)
	defer t.Stop()
	for range jobSteps {
		select {
		case <-t.C:
		case <-ctx.Done():
			return res, context.Cause(ctx)
		}
		// checkpoint locks the same key: with ctx it reuses this lock
		// instead of waiting for it (reentrancy).
		if err := s.checkpoint(ctx, j); err != nil {
			return res, err
		}
		res.Steps++
		t.Reset(j.Duration / jobSteps)
	}
	res.FinishedAt = time.Now().UTC()
	return res, nil
}

// saveCheckpoint records a run's progress; it can be called on its own
// (it locks the job) or from within a run.
func (s *server) saveCheckpoint(ctx context.Context, j job) error {
	s.logger.Debug("job checkpoint", "job", j.Name, "fence", padlock.FromContext(ctx).Fence())
	return nil
}

// jobNames are the jobs the app runs. A fixed set, because every name is
// a lock a caller can hold: names taken from requests would let one caller
// hold any number of locks, and fill Redis with keys.
var jobNames = []string{"nightly-report", "reindex", "cleanup", "invoices", "reminders", "export", "digest", "backup"}

// maxJobSeconds is the longest run ?seconds= may ask for: how long one
// request can hold a job's lock.
const maxJobSeconds = 30

type jobURI struct {
	Name string `uri:"name" binding:"required"` // one of jobNames
}

type jobQuery struct {
	Seconds float64 `form:"seconds" binding:"omitempty,gt=0,lte=30"`
}

func (s *server) runJobRoute(c *gin.Context) {
	var uri jobURI
	if err := c.ShouldBindUri(&uri); err != nil {
		writeProblem(c, bindProblem(err, &uri, fromPath))
		return
	}
	if !slices.Contains(jobNames, uri.Name) {
		writeProblem(c, newProblem(http.StatusNotFound, "no such job; GET / lists the jobs"))
		return
	}
	var q jobQuery
	if err := c.ShouldBindQuery(&q); err != nil {
		writeProblem(c, bindProblem(err, &q, fromQuery))
		return
	}
	j := job{Name: uri.Name, Duration: s.cfg.jobDuration}
	if q.Seconds > 0 {
		j.Duration = time.Duration(q.Seconds * float64(time.Second))
	}
	res, err := s.runJob(c.Request.Context(), j)
	switch {
	case err == nil:
		s.logger.Info("job finished", "job", j.Name, "fence", res.Fence)
		c.JSON(http.StatusOK, res)
	case errors.Is(err, padlock.ErrUnavailable):
		// Checked first: on Redlock, too few nodes answering matches both.
		why, in := explainUnavailable(err, s.backend.lockTTL)
		s.logger.Warn("job: lock unavailable: "+why, "job", j.Name, "err", err)
		p := newProblem(http.StatusServiceUnavailable, why)
		p.RetryAfter = in
		writeProblem(c, p)
	case errors.Is(err, padlock.ErrNotAcquired) && c.Request.Context().Err() == nil:
		d, _ := padlock.RetryAfter(err)
		s.logger.Info("job busy", "job", j.Name, "retry_after", d.Round(time.Millisecond))
		p := newProblem(http.StatusConflict, "this job is running already; retry later")
		p.RetryAfter = d
		var na *padlock.NotAcquiredError
		if errors.As(err, &na) {
			p.Key = na.Key
		}
		writeProblem(c, p)
	case errors.Is(err, decorator.ErrKey):
		writeProblem(c, newProblem(http.StatusBadRequest, err.Error()))
	default:
		s.fail(c, "running job "+j.Name, err)
	}
}
