package sandboxes

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestSkillStoreOwners: a transaction sees only its owner's records, whatever ids and owner names are chosen to
// collide (one owner's name a prefix of another's, an id that looks like another owner's key); an owner with a NUL
// is refused; a read transaction cannot write.
func TestSkillStoreOwners(t *testing.T) {
	st := NewBoltStore(filepath.Join(t.TempDir(), "s.db"))
	defer st.Close()
	put := func(owner, id, v string) {
		t.Helper()
		if err := st.UpdateSkills(owner, func(tx SkillTx) error { return tx.Put(SkillCandidates, id, []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	put("al", "x", "al's")
	put("alice", "x", "alice's")
	put("al", "ice\x00x", "al's tricky id")
	for _, tc := range []struct {
		owner string
		ids   []string
		x     string
	}{
		{"al", []string{"ice\x00x", "x"}, "al's"},
		{"alice", []string{"x"}, "alice's"},
		{"bob", nil, ""},
	} {
		var ids []string
		var x []byte
		err := st.ViewSkills(tc.owner, func(tx SkillTx) error {
			var err error
			if x, err = tx.Get(SkillCandidates, "x"); err != nil {
				return err
			}
			return tx.Each(SkillCandidates, func(id string, _ []byte) error { ids = append(ids, id); return nil })
		})
		if err != nil || !slices.Equal(ids, tc.ids) || string(x) != tc.x {
			t.Errorf("%s: ids %q x %q %v, want %q %q", tc.owner, ids, x, err, tc.ids, tc.x)
		}
	}
	if err := st.UpdateSkills("a\x00lice", func(SkillTx) error { return nil }); err == nil {
		t.Error("an owner with a NUL was accepted")
	}
	if err := st.UpdateSkills("", func(SkillTx) error { return nil }); err == nil {
		t.Error("an empty owner was accepted")
	}
	if err := st.ViewSkills("al", func(tx SkillTx) error { return tx.Put(SkillReleases, "y", []byte("{}")) }); err == nil {
		t.Error("a read transaction wrote")
	}
	if err := st.ViewSkills("al", func(tx SkillTx) error { _, err := tx.Get("other", "x"); return err }); err == nil {
		t.Error("an unknown kind was read")
	}
	var n int
	_ = st.ViewSkills("al", func(tx SkillTx) error { n, _ = tx.Count(SkillCandidates); return nil })
	if n != 2 {
		t.Errorf("al's count: %d", n)
	}
}
