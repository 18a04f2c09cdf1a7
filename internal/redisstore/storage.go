package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
)

// Storage is certmagic's storage (certificates, keys, ACME accounts, OCSP staples, locks) in Redis, so every
// gateway of a fleet finds a certificate any of them obtained and only one of them asks the CA for it. Each file is
// a hash (value and modification time) under prefix + "f:" + key; one sorted set, prefix + "index", holds every
// file's key for prefix listing (ZRANGEBYLEX), so "directories" exist exactly while a file lies under them. Store
// writes the file and the index entry in one MULTI; Delete removes a file or a whole directory in one script.
// Safe for concurrent use.
type Storage struct {
	client redis.UniversalClient
	prefix string
	// lockTTL is how long a lock outlives a holder that stops refreshing it (a killed gateway).
	lockTTL time.Duration
	// lockPoll is how often Lock retries a taken lock.
	lockPoll time.Duration

	mu   sync.Mutex
	held map[string]*heldLock
}

// heldLock is a lock this Storage holds: its token, and the refresher to stop at Unlock.
type heldLock struct {
	token string
	stop  context.CancelFunc
	done  chan struct{}
}

// DefaultLockTTL is how long a lock stays after its holder dies; a live holder refreshes it every third of that.
const DefaultLockTTL = 30 * time.Second

// NewStorage returns the storage under prefix. lockTTL 0 means DefaultLockTTL.
func NewStorage(client redis.UniversalClient, prefix string, lockTTL time.Duration) *Storage {
	if lockTTL <= 0 {
		lockTTL = DefaultLockTTL
	}
	return &Storage{client: client, prefix: prefix, lockTTL: lockTTL, lockPoll: lockTTL / 30, held: map[string]*heldLock{}}
}

func (s *Storage) fileKey(key string) string { return s.prefix + "f:" + key }
func (s *Storage) indexKey() string          { return s.prefix + "index" }
func (s *Storage) lockKey(name string) string {
	return s.prefix + "lock:" + name
}

// clean makes a key canonical as a file system path would be (certmagic's FileStorage joins keys into paths): no
// slash at either end, no empty, "." or ".." component, and nothing above the root.
func clean(key string) string { return strings.TrimPrefix(path.Clean("/"+key), "/") }

// under is the ZRANGEBYLEX range of every key below dir ("" is the root): "dir/" up to, not including, "dir0"
// ('0' follows '/').
func under(dir string) (minLex, maxLex string) {
	if dir == "" {
		return "-", "+"
	}
	return "[" + dir + "/", "(" + dir + "0"
}

// Store implements certmagic.Storage.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	key = clean(key)
	if key == "" {
		return errors.New("redis storage: empty key")
	}
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.fileKey(key), "v", value, "m", time.Now().UnixMilli())
		p.ZAdd(ctx, s.indexKey(), redis.Z{Member: key})
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis storage: storing %s: %w", key, err)
	}
	return nil
}

// Load implements certmagic.Storage.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	key = clean(key)
	v, err := s.client.HGet(ctx, s.fileKey(key), "v").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redis storage: %s: %w", key, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("redis storage: loading %s: %w", key, err)
	}
	return v, nil
}

// deleteScript removes the file KEYS[1]'s and every file under it. ARGV: the file-key prefix, the key, and the
// ZRANGEBYLEX bounds of what lies under it.
var deleteScript = redis.NewScript(`
redis.call('DEL', ARGV[1] .. ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[2])
local below = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[3], ARGV[4])
for _, k in ipairs(below) do redis.call('DEL', ARGV[1] .. k) end
if #below > 0 then redis.call('ZREMRANGEBYLEX', KEYS[1], ARGV[3], ARGV[4]) end
return #below
`)

// Delete implements certmagic.Storage: a file, or a directory and everything in it; a missing key is no error.
func (s *Storage) Delete(ctx context.Context, key string) error {
	key = clean(key)
	if key == "" {
		return errors.New("redis storage: refusing to delete the root")
	}
	lo, hi := under(key)
	if err := deleteScript.Run(ctx, s.client, []string{s.indexKey()}, s.prefix+"f:", key, lo, hi).Err(); err != nil {
		return fmt.Errorf("redis storage: deleting %s: %w", key, err)
	}
	return nil
}

// isDir reports whether some file lies under key.
func (s *Storage) isDir(ctx context.Context, key string) (bool, error) {
	lo, hi := under(key)
	below, err := s.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.indexKey(), Start: lo, Stop: hi, ByLex: true, Count: 1}).Result()
	return len(below) > 0, err
}

// Exists implements certmagic.Storage: a file or a directory.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	key = clean(key)
	if key != "" {
		if n, err := s.client.Exists(ctx, s.fileKey(key)).Result(); err == nil && n == 1 {
			return true
		}
	}
	dir, err := s.isDir(ctx, key)
	return err == nil && dir
}

// List implements certmagic.Storage like its FileStorage: the full keys of what lies in dir, files and
// directories, one level or (recursive) every level; fs.ErrNotExist when nothing does and dir is no file.
func (s *Storage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	dir = clean(dir)
	lo, hi := under(dir)
	below, err := s.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.indexKey(), Start: lo, Stop: hi, ByLex: true}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis storage: listing %s: %w", dir, err)
	}
	if len(below) == 0 {
		if dir != "" && s.Exists(ctx, dir) {
			return nil, nil
		}
		return nil, fmt.Errorf("redis storage: %s: %w", dir, fs.ErrNotExist)
	}
	return listUnder(dir, below, recursive), nil
}

// listUnder turns the file keys below dir (sorted, each starting with dir + "/", or any key when dir is the root)
// into List's answer: the full keys of dir's direct children, files and directories, or with recursive every file
// and every directory on the way to one, each once. The keys come from certmagic, partly from names clients send
// (on-demand TLS), so this is fuzzed (FuzzListUnder).
func listUnder(dir string, below []string, recursive bool) []string {
	base := ""
	if dir != "" {
		base = dir + "/"
	}
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, k := range below {
		if !strings.HasPrefix(k, base) || len(k) == len(base) {
			continue
		}
		rel := k[len(base):]
		if !recursive {
			first, _, _ := strings.Cut(rel, "/")
			add(base + first)
			continue
		}
		for i := range len(rel) {
			if rel[i] == '/' {
				add(base + rel[:i])
			}
		}
		add(k)
	}
	return out
}

// Stat implements certmagic.Storage.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	key = clean(key)
	if key != "" {
		// One MULTI: the time and the size are of the same write.
		var modified *redis.StringCmd
		var size *redis.IntCmd
		_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			modified = p.HGet(ctx, s.fileKey(key), "m")
			size = p.HStrLen(ctx, s.fileKey(key), "v")
			return nil
		})
		switch {
		case err == nil:
			n, _ := strconv.ParseInt(modified.Val(), 10, 64)
			return certmagic.KeyInfo{Key: key, Modified: time.UnixMilli(n), Size: size.Val(), IsTerminal: true}, nil
		case !errors.Is(err, redis.Nil):
			return certmagic.KeyInfo{}, fmt.Errorf("redis storage: stat %s: %w", key, err)
		}
	}
	dir, err := s.isDir(ctx, key)
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("redis storage: stat %s: %w", key, err)
	}
	if !dir {
		return certmagic.KeyInfo{}, fmt.Errorf("redis storage: %s: %w", key, fs.ErrNotExist)
	}
	return certmagic.KeyInfo{Key: key}, nil
}

// String names the storage for Caddy's logs; never the password.
func (s *Storage) String() string {
	return "redis storage " + s.prefix
}

var _ certmagic.Storage = (*Storage)(nil)
