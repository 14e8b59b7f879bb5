package nodeagent

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeLedger: any file content yields a usable ledger (maybe empty, with an error),
// never a panic, and what is decoded survives an encode and a decode unchanged.
func FuzzDecodeLedger(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"version":1}`, `{"version":1,"containers":null}`,
		`{"version":1,"containers":[{"podUID":"u","container":"c","ref":{"podUID":"u","containerID":"containerd://x"},"tasks":{"12":{"start":5,"prev":-1,"values":[0]}}}]}`,
		`{"version":1,"containers":[null,{"podUID":"","container":"c"}]}`,
		`{"version":3,"containers":[]}`, `{"version":2,"bootID":"b","containers":[]}`, `{"version":1,"containers":[{"podUID":"u","container":"c","tasks":{"-3":null,"4":null}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		f, _ := decodeLedgerFile(data)
		l := f.ledger()
		for k, c := range l {
			for tid, te := range c.Tasks {
				if te == nil || tid <= 0 {
					t.Fatalf("container %v kept task %d = %v", k, tid, te)
				}
			}
		}
		enc, err := json.Marshal(ledgerFile{Version: ledgerVersion, BootID: f.BootID, Containers: l.sorted()})
		if err != nil {
			t.Fatalf("encoding a decoded ledger: %v", err)
		}
		again, err := decodeLedgerFile(enc)
		if err != nil {
			t.Fatalf("an encoded ledger does not decode: %v\n%s", err, enc)
		}
		if diff := cmp.Diff(l, again.ledger()); diff != "" {
			t.Errorf("encode and decode changed the ledger (-decoded +again):\n%s", diff)
		}
	})
}
