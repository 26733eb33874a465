package lockview

import (
	"time"

	"github.com/padlockgo/padlock/internal/keyattr"
)

// The picture of the last minutes: per namespace, how many locks were
// taken, refused, waited for and lost in each of the last ActivityBuckets
// spans of ActivityBucket. Counts are kept per namespace, never per key
// (keys are unbounded), and for at most maxNamespaces namespaces; the
// rest are counted under "(other)".
const (
	// ActivityBucket is the span of one bar of the page's picture.
	ActivityBucket = 10 * time.Second
	// ActivityBuckets is how many bars the picture has: 5 minutes.
	ActivityBuckets = 30

	maxNamespaces  = 32
	otherNamespace = "(other)"
)

// counts is one bucket of one namespace.
type counts struct {
	acquired, refused, waited, lost int
}

// series is one namespace's buckets, a ring indexed by bucket number
// (the Unix time divided by ActivityBucket) modulo ActivityBuckets.
type series struct {
	bucket [ActivityBuckets]int64 // the bucket number each slot holds
	counts [ActivityBuckets]counts
}

// add counts one event of the namespace of key at now: f picks the count.
// The caller holds the Recorder's mutex.
func (r *Recorder) add(key string, now time.Time, f func(*counts)) {
	ns := keyattr.Namespace(key)
	s := r.activity[ns]
	if s == nil {
		if len(r.activity) >= maxNamespaces {
			ns = otherNamespace
			s = r.activity[ns]
		}
		if s == nil {
			if r.activity == nil {
				r.activity = make(map[string]*series)
			}
			s = &series{}
			r.activity[ns] = s
		}
	}
	b := now.UnixNano() / int64(ActivityBucket)
	i := int(b % ActivityBuckets)
	if s.bucket[i] != b {
		s.bucket[i], s.counts[i] = b, counts{}
	}
	f(&s.counts[i])
}

// Activity is one namespace's counts in the picture, oldest bucket first.
type Activity struct {
	Namespace string `json:"namespace"` // the keys' namespace, as Key.Namespace
	Acquired  []int  `json:"acquired"`  // locks taken, per bucket
	Refused   []int  `json:"refused"`   // acquisitions refused because the key stayed busy
	Waited    []int  `json:"waited"`    // acquisitions that waited for the key
	Lost      []int  `json:"lost"`      // locks lost
}

// activityUntil returns the counts of the ActivityBuckets buckets that end
// with the one holding now, namespaces in order. The caller holds the
// Recorder's mutex.
func (r *Recorder) activityUntil(now time.Time) []Activity {
	last := now.UnixNano() / int64(ActivityBucket)
	out := make([]Activity, 0, len(r.activity))
	for ns, s := range r.activity {
		a := Activity{Namespace: ns, Acquired: make([]int, ActivityBuckets), Refused: make([]int, ActivityBuckets),
			Waited: make([]int, ActivityBuckets), Lost: make([]int, ActivityBuckets)}
		seen := false
		for j := range ActivityBuckets {
			b := last - ActivityBuckets + 1 + int64(j)
			i := int(b % ActivityBuckets)
			if s.bucket[i] != b {
				continue
			}
			c := s.counts[i]
			a.Acquired[j], a.Refused[j], a.Waited[j], a.Lost[j] = c.acquired, c.refused, c.waited, c.lost
			seen = seen || c != counts{}
		}
		if seen {
			out = append(out, a)
		}
	}
	return out
}
