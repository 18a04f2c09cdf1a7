package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// StateStore keeps the sandbox records of a fleet of gateways in the Kubernetes API (a sandboxes.SharedStore):
// one Secret per sandbox holding its Record as JSON, and one ConfigMap of the Manager's meta values. A record holds
// the sandbox's agent token, which every gateway of the fleet needs in clear to talk to the agent (after a restart
// too), so it is a Secret: the cluster's aggregated `view` role reads ConfigMaps but not Secrets (issue 33). Records
// an older version kept in ConfigMaps are moved into Secrets at start (migrateConfigMapRecords). Writes
// use the API's optimistic concurrency (resourceVersion, retried on conflict), an informer feeds the changes
// other gateways make, and a Lease (leader.go) says which gateway runs the collector. Everything else the
// gateway persists (workspace metadata, snapshots, API keys, history, exports) stays in the embedded local
// BoltStore, per gateway, so the Manager's and the APIs' type assertions keep working.
type StateStore struct {
	*sandboxes.BoltStore
	cs       kubernetes.Interface
	cfg      StateConfig
	identity string

	ctx    context.Context
	cancel context.CancelFunc

	startOnce sync.Once
	startErr  error
	lister    listersv1.SecretNamespaceLister
	informed  sync.WaitGroup

	mu sync.Mutex
	// known holds the records this store has seen in the API or written; gone those deleted anywhere. A write of
	// a gone record is dropped, and a known one that vanished is not created again: a late write of a gateway
	// that had not heard of a delete yet never brings a deleted sandbox back.
	known map[string]bool
	gone  map[string]bool
	queue []sandboxes.RecordChange
	wake  chan struct{}

	leading atomic.Bool
}

// StateConfig says where a fleet's records live.
type StateConfig struct {
	// Namespace is the Kubernetes namespace of the records and the Lease: the driver's.
	Namespace string
	// Manager is the Manager's namespace (the sandboxes app's), so two Managers in one Kubernetes namespace
	// keep apart.
	Manager string
	// Identity names this gateway in the Lease and on its warm members; empty: the host name and a random
	// suffix (a restarted gateway is a new identity).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are the GC Lease's timings (client-go leaderelection);
	// defaults 15s, 10s, 2s. A killed leader's lease passes to another gateway after LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

const (
	// labelState marks the store's objects: "sandbox" for a record (a Secret), "meta" for the meta values (a
	// ConfigMap).
	labelState = kubenames.Prefix + "state"
	// labelManager is the Manager's namespace (label value).
	labelManager = kubenames.Prefix + "manager"
	// annoWriter is the identity of the gateway that wrote a record last: its own writes are no news to it.
	annoWriter = kubenames.Prefix + "writer"
	recordKey  = "record.json"
)

// StatePermissions is what the state store needs beyond the driver's Permissions, in the same namespace.
var StatePermissions = []permission{
	{"", "secrets", []string{"get", "list", "watch", "create", "update", "delete"}},
	// The meta values; list and delete move an older version's records out of ConfigMaps.
	{"", "configmaps", []string{"get", "list", "create", "update", "delete"}},
	{"coordination.k8s.io", "leases", []string{"get", "create", "update"}},
}

// NewStateStore makes a store on cs; local keeps what stays per gateway. It does no I/O: Load starts the
// informer.
func NewStateStore(cs kubernetes.Interface, cfg StateConfig, local *sandboxes.BoltStore) (*StateStore, error) {
	cfg, err := CheckStateConfig(cfg)
	if err != nil {
		return nil, err
	}
	if local == nil {
		return nil, errors.New("the kubernetes state store needs a local store")
	}
	id := cfg.Identity
	if id == "" {
		id = defaultIdentity()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &StateStore{BoltStore: local, cs: cs, cfg: cfg, identity: id, ctx: ctx, cancel: cancel,
		known: map[string]bool{}, gone: map[string]bool{}, wake: make(chan struct{}, 1)}, nil
}

// Identity is this gateway's name in the fleet.
func (s *StateStore) Identity() string { return s.identity }

// Leading reports whether this gateway holds the GC Lease.
func (s *StateStore) Leading() bool { return s.leading.Load() }

// recordName is the Secret of a sandbox's record (and the ConfigMap an older version kept it in). The suffix
// has a dot, which no container record's name (a DNS label) has, so the two kinds never collide.
func (s *StateStore) recordName(id string) string {
	return kubenames.Object(s.cfg.Manager+"-"+id) + ".sandbox"
}

func (s *StateStore) metaName() string { return kubenames.Object(s.cfg.Manager) + ".meta" }

func (s *StateStore) labels(kind string) map[string]string {
	return map[string]string{kubenames.LabelManagedBy: kubenames.ManagedBy, labelState: kind, labelManager: kubenames.LabelValue(s.cfg.Manager)}
}

func (s *StateStore) configMaps() typedcorev1.ConfigMapInterface {
	return s.cs.CoreV1().ConfigMaps(s.cfg.Namespace)
}

func (s *StateStore) secrets() typedcorev1.SecretInterface {
	return s.cs.CoreV1().Secrets(s.cfg.Namespace)
}

// start checks the permissions, then starts the informer on the records and waits for its first list.
func (s *StateStore) start() error {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		defer cancel()
		if s.startErr = s.checkPermissions(ctx); s.startErr != nil {
			return
		}
		if s.startErr = s.migrateConfigMapRecords(ctx); s.startErr != nil {
			return
		}
		sel := labels.SelectorFromSet(s.labels("sandbox")).String()
		f := informers.NewSharedInformerFactoryWithOptions(s.cs, 0, informers.WithNamespace(s.cfg.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
		inf := f.Core().V1().Secrets()
		s.lister = inf.Lister().Secrets(s.cfg.Namespace)
		if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.observed(o) },
			UpdateFunc: func(_, o any) { s.observed(o) },
			DeleteFunc: s.deleted,
		}); err != nil {
			s.startErr = fmt.Errorf("following the sandbox records: %w", err)
			return
		}
		f.Start(s.ctx.Done())
		s.informed.Add(1)
		go func() {
			defer s.informed.Done()
			<-s.ctx.Done()
			f.Shutdown()
		}()
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			s.startErr = fmt.Errorf("reading the sandbox records from kubernetes namespace %s: no answer within a minute", s.cfg.Namespace)
		}
	})
	return s.startErr
}

func (s *StateStore) checkPermissions(ctx context.Context) error {
	var missing []string
	for _, p := range StatePermissions {
		for _, verb := range p.verbs {
			r, err := s.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: s.cfg.Namespace, Group: p.group, Resource: p.resource, Verb: verb,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("asking the API what the gateway may do: %w", err)
			}
			if !r.Status.Allowed {
				missing = append(missing, verb+" "+qualified(p.group, p.resource))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the gateway's kubernetes identity may not %s in namespace %s, which state kubernetes needs (docs/kubernetes.md lists the Role)",
			strings.Join(missing, ", "), s.cfg.Namespace)
	}
	return nil
}

// decode reads a record Secret.
func decode(cm *corev1.Secret) (sandboxes.Record, error) {
	var r sandboxes.Record
	if err := json.Unmarshal(cm.Data[recordKey], &r); err != nil {
		return r, fmt.Errorf("sandbox record %s: %w", cm.Name, err)
	}
	if r.ID == "" {
		return r, fmt.Errorf("sandbox record %s has no id", cm.Name)
	}
	return r, nil
}

// recordSecret is the Secret of a record named name holding the record's JSON b.
func (s *StateStore) recordSecret(name string, b []byte, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.cfg.Namespace,
		Labels: s.labels("sandbox"), Annotations: annotations},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{recordKey: b}}
}

// migrateConfigMapRecords moves the records an older version kept in ConfigMaps, agent tokens in clear, into
// Secrets: each is created as a Secret (unless one of the name exists: that one is newer) and its ConfigMap
// deleted. It runs before the informer lists the Secrets, so the Manager loads every record. Upgrade every gateway
// of a fleet together: an older gateway still running would write ConfigMaps that nobody reads.
func (s *StateStore) migrateConfigMapRecords(ctx context.Context) error {
	list, err := s.configMaps().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.labels("sandbox")).String()})
	if err != nil {
		return fmt.Errorf("listing sandbox records kept in configmaps: %w", err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		sec := s.recordSecret(cm.Name, []byte(cm.Data[recordKey]), cm.Annotations)
		if _, err := s.secrets().Create(ctx, sec, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("moving sandbox record %s into a secret: %w", cm.Name, err)
		}
		if err := s.configMaps().Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting sandbox record %s's configmap: %w", cm.Name, err)
		}
	}
	return nil
}

func (s *StateStore) observed(o any) {
	cm, ok := o.(*corev1.Secret)
	if !ok {
		return
	}
	r, err := decode(cm)
	if err != nil {
		return // not ours to read (someone edited it by hand); Load reports it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known[r.ID] = true
	if cm.Annotations[annoWriter] == s.identity || s.gone[r.ID] {
		return
	}
	s.enqueueLocked(sandboxes.RecordChange{ID: r.ID, Record: r})
}

func (s *StateStore) deleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	cm, ok := o.(*corev1.Secret)
	if !ok {
		return
	}
	r, err := decode(cm)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone[r.ID] = true
	s.enqueueLocked(sandboxes.RecordChange{ID: r.ID, Deleted: true})
}

func (s *StateStore) enqueueLocked(c sandboxes.RecordChange) {
	s.queue = append(s.queue, c)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Load starts following the records and returns them as the informer's first list has them. Changes after
// that list are queued for Follow, so none is missed between the two.
func (s *StateStore) Load() ([]sandboxes.Record, error) {
	if err := s.start(); err != nil {
		return nil, err
	}
	cms, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing sandbox records: %w", err)
	}
	return decodeAll(cms)
}

func decodeAll(cms []*corev1.Secret) ([]sandboxes.Record, error) {
	out := make([]sandboxes.Record, 0, len(cms))
	var errs []error
	for _, cm := range cms {
		r, err := decode(cm)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// Fresh lists the records from the API itself, not from the informer's cache.
func (s *StateStore) Fresh(ctx context.Context) ([]sandboxes.Record, error) {
	list, err := s.secrets().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.labels("sandbox")).String()})
	if err != nil {
		return nil, fmt.Errorf("listing sandbox records: %w", err)
	}
	cms := make([]*corev1.Secret, len(list.Items))
	for i := range list.Items {
		cms[i] = &list.Items[i]
	}
	return decodeAll(cms)
}

// writeTimeout bounds one store call: the Store interface has no context, and a write must not hang a gateway.
const writeTimeout = 30 * time.Second

// Put writes a record: an update on the version last seen, retried on a conflict with a fresh read; a create
// only for a record this store never saw.
func (s *StateStore) Put(r sandboxes.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding sandbox %s: %w", r.ID, err)
	}
	s.mu.Lock()
	gone, known := s.gone[r.ID], s.known[r.ID]
	s.mu.Unlock()
	if gone {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, writeTimeout)
	defer cancel()
	name := s.recordName(r.ID)
	cms := s.secrets()
	first := true
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var cur *corev1.Secret
		var err error
		if first && s.lister != nil {
			// The cache spares a read in the usual case; it may lag a create, so only the API says "not found".
			cur, err = s.lister.Get(name)
		}
		if !first || s.lister == nil || err != nil {
			cur, err = cms.Get(ctx, name, metav1.GetOptions{})
		}
		first = false
		switch {
		case apierrors.IsNotFound(err) && known:
			return errGone
		case apierrors.IsNotFound(err):
			cm := s.recordSecret(name, b, map[string]string{annoWriter: s.identity})
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				known = true
				return apierrors.NewConflict(corev1.Resource("secrets"), name, err) // read it and update
			}
			return err
		case err != nil:
			return err
		}
		cm := cur.DeepCopy()
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[annoWriter] = s.identity
		cm.Data = map[string][]byte{recordKey: b}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return errGone
		}
		return err
	})
	if errors.Is(err, errGone) {
		// Deleted by another gateway since this one last read it: it stays deleted.
		s.mu.Lock()
		s.gone[r.ID] = true
		s.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing sandbox record %s: %w", r.ID, err)
	}
	s.mu.Lock()
	s.known[r.ID] = true
	s.mu.Unlock()
	return nil
}

var errGone = errors.New("sandbox record deleted")

// PutMany writes records one by one: the API has no transaction over objects.
func (s *StateStore) PutMany(recs []sandboxes.Record) error {
	var errs []error
	for _, r := range recs {
		if err := s.Put(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Delete removes a record; a missing one is not an error.
func (s *StateStore) Delete(id string) error {
	s.mu.Lock()
	s.gone[id] = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, writeTimeout)
	defer cancel()
	err := s.secrets().Delete(ctx, s.recordName(id), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting sandbox record %s: %w", id, err)
	}
	return nil
}

// Meta reads a meta value from the API ("" if absent).
func (s *StateStore) Meta(key string) (string, error) {
	// The Manager's first call: the permission check runs before anything else is asked of the API.
	if err := s.start(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(s.ctx, writeTimeout)
	defer cancel()
	cm, err := s.configMaps().Get(ctx, s.metaName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading sandbox meta values: %w", err)
	}
	return cm.Data[key], nil
}

// SetMeta writes a meta value.
func (s *StateStore) SetMeta(key, value string) error {
	_, err := s.setMeta(key, value, true)
	return err
}

// InitMeta sets key unless it is set, and answers the value that holds.
func (s *StateStore) InitMeta(key, value string) (string, error) { return s.setMeta(key, value, false) }

func (s *StateStore) setMeta(key, value string, overwrite bool) (string, error) {
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		return "", fmt.Errorf("meta key %q: %s", key, strings.Join(errs, "; "))
	}
	if err := s.start(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(s.ctx, writeTimeout)
	defer cancel()
	cms := s.configMaps()
	held := value
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := cms.Get(ctx, s.metaName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.metaName(), Namespace: s.cfg.Namespace, Labels: s.labels("meta")},
				Data: map[string]string{key: value}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.metaName(), err)
			}
			held = value
			return err
		}
		if err != nil {
			return err
		}
		if v := cur.Data[key]; v != "" && !overwrite {
			held = v
			return nil
		}
		cm := cur.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
		held = value
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("writing sandbox meta value %s: %w", key, err)
	}
	return held, nil
}

// Follow hands the queued changes to apply until ctx ends, and meanwhile takes part in the GC Lease's election
// (leader.go).
func (s *StateStore) Follow(ctx context.Context, apply func(sandboxes.RecordChange)) {
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		s.elect(ctx)
	}()
	defer func() { <-elected }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, c := range q {
			apply(c)
		}
	}
}

// Close stops the informer and closes the local store.
func (s *StateStore) Close() error {
	s.cancel()
	s.informed.Wait()
	return s.BoltStore.Close()
}

var _ sandboxes.SharedStore = (*StateStore)(nil)

// CheckStateConfig fills cfg's defaults and checks it without any I/O (the Caddy module calls it at provision).
func CheckStateConfig(cfg StateConfig) (StateConfig, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Manager == "" {
		cfg.Manager = "sandgate"
	}
	if errs := kubenames.Validate(cfg.Namespace); errs != "" {
		return cfg, fmt.Errorf("kubernetes namespace %q: %s", cfg.Namespace, errs)
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline <= 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	if cfg.RenewDeadline >= cfg.LeaseDuration || cfg.RetryPeriod >= cfg.RenewDeadline {
		return cfg, fmt.Errorf("lease timings: want retry_period < renew_deadline < lease_duration (got %s, %s, %s)",
			cfg.RetryPeriod, cfg.RenewDeadline, cfg.LeaseDuration)
	}
	return cfg, nil
}
