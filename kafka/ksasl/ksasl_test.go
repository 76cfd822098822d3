package ksasl

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type credDB map[string]ScramCredential // user/mech → credential

func (db credDB) lookup(user, mech string) (ScramCredential, bool, error) {
	c, ok := db[user+"/"+mech]
	return c, ok, nil
}

func newDB(t testing.TB) credDB {
	db := credDB{}
	for _, mech := range ScramMechanisms {
		c, err := NewScramCredentialFromPassword(mech, "alice-secret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		db["alice/"+mech] = c
		c2, err := NewScramCredentialFromPassword(mech, "p,=w", 8192)
		if err != nil {
			t.Fatal(err)
		}
		db["we,ird=name/"+mech] = c2
	}
	return db
}

// run drives a franz-go client mechanism against a server exchange, the
// way the broker's conn layer does with SaslAuthenticate.
func run(t testing.TB, m sasl.Mechanism, ex Exchange) error {
	sess, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		resp, done, err := ex.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, cerr := sess.Challenge(resp)
		if cerr != nil {
			return cerr
		}
		if done {
			if !cdone {
				return errors.New("server done, client not")
			}
			return nil
		}
		msg = next
	}
	return errors.New("exchange did not finish")
}

func TestScramWithFranzGoClient(t *testing.T) {
	db := newDB(t)
	for _, c := range []struct {
		mech, user, pass string
		ok               bool
	}{
		{ScramSHA256, "alice", "alice-secret", true},
		{ScramSHA512, "alice", "alice-secret", true},
		{ScramSHA512, "we,ird=name", "p,=w", true},
		{ScramSHA256, "alice", "wrong", false},
		{ScramSHA256, "nobody", "alice-secret", false},
	} {
		a := scram.Auth{User: c.user, Pass: c.pass}
		m := a.AsSha256Mechanism()
		if c.mech == ScramSHA512 {
			m = a.AsSha512Mechanism()
		}
		ex, err := New(c.mech, db.lookup, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = run(t, m, ex)
		if c.ok && (err != nil || ex.Result().User != c.user) {
			t.Errorf("%s %s: %v (user %q)", c.mech, c.user, err, ex.Result().User)
		}
		if !c.ok && !errors.Is(err, ErrAuthentication) {
			t.Errorf("%s %s/%s: got %v, want an authentication failure", c.mech, c.user, c.pass, err)
		}
	}
}

func TestPlain(t *testing.T) {
	db := newDB(t)
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{{"alice", "alice-secret", true}, {"alice", "nope", false}, {"bob", "x", false}} {
		ex, _ := New(Plain, db.lookup, nil)
		err := run(t, plain.Auth{User: c.user, Pass: c.pass}.AsMechanism(), ex)
		if c.ok != (err == nil) {
			t.Errorf("PLAIN %s: %v", c.user, err)
		}
		if !c.ok && !strings.Contains(err.Error(), "Invalid username or password") {
			t.Errorf("PLAIN %s message: %v", c.user, err)
		}
	}
	ex, _ := New(Plain, db.lookup, nil)
	if _, _, err := ex.Step([]byte("mallory\x00alice\x00alice-secret")); err == nil {
		t.Fatal("PLAIN accepted a foreign authorization id")
	}
}

func TestScramRejectsMalformed(t *testing.T) {
	db := newDB(t)
	for _, first := range []string{"", "n", "p=tls-unique,,n=alice,r=abc", "n,,r=abc", "n,,n=alice", "n,a=bob,n=alice,r=x",
		"n,,n=alice,r=abc,tokenauth=true", "x,,n=alice,r=abc", "n,,n=al=ZZice,r=abc"} {
		ex, _ := New(ScramSHA256, db.lookup, nil)
		if _, _, err := ex.Step([]byte(first)); !errors.Is(err, ErrAuthentication) {
			t.Errorf("first %q: %v", first, err)
		}
	}
	ex, _ := New(ScramSHA256, db.lookup, nil)
	sf, done, err := ex.Step([]byte("n,,n=alice,r=abc"))
	if err != nil || done || !strings.HasPrefix(string(sf), "r=abc") {
		t.Fatalf("server first %q %v %v", sf, done, err)
	}
	nonce := strings.Split(string(sf), ",")[0][2:]
	for _, final := range []string{"c=biws,r=" + nonce, "c=eSws,r=" + nonce + ",p=AAAA", "c=biws,r=other,p=AAAA",
		"c=biws,r=" + nonce + ",p=!!!", "c=biws,r=" + nonce + ",p=" + strings.Repeat("A", 44)} {
		ex2 := *ex.(*scramExchange)
		if _, _, err := ex2.Step([]byte(final)); !errors.Is(err, ErrAuthentication) {
			t.Errorf("final %q: %v", final, err)
		}
	}
}

func TestCredentialBounds(t *testing.T) {
	if _, err := NewScramCredentialFromPassword(ScramSHA256, "x", 4095); err == nil {
		t.Fatal("4095 iterations accepted")
	}
	if _, err := NewScramCredentialFromPassword(ScramSHA256, "x", 16385); err == nil {
		t.Fatal("16385 iterations accepted")
	}
	if _, err := NewScramCredential(ScramSHA512, make([]byte, 32), []byte("salt"), 4096); err == nil {
		t.Fatal("SHA-512 credential from a 32-byte salted password accepted")
	}
	// RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil".
	sp, _ := SaltPassword(ScramSHA256, "pencil", mustB64("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
	c, err := NewScramCredential(ScramSHA256, sp, mustB64("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
	if err != nil || !c.VerifyPassword("pencil") || c.VerifyPassword("pencils") {
		t.Fatalf("rfc 7677 credential: %v", err)
	}
	ex := &scramExchange{mech: ScramSHA256, h: hashOf(ScramSHA256), lookup: func(string, string) (ScramCredential, bool, error) { return c, true, nil }}
	if _, _, err := ex.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")); err != nil {
		t.Fatal(err)
	}
	// Replace the random server nonce with the RFC's to check the proof.
	ex.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	ex.serverFirst = "r=" + ex.nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	resp, done, err := ex.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done || string(resp) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("rfc 7677 final: %q %v %v", resp, done, err)
	}
}

func TestOAuthBearer(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	validate := func(tok string) (string, time.Time, error) {
		if tok == "good" {
			return "svc", exp, nil
		}
		return "", time.Time{}, errors.New("bad signature")
	}
	ex, _ := New(OAuthBearer, nil, validate)
	if err := run(t, oauth.Auth{Token: "good"}.AsMechanism(), ex); err != nil || ex.Result().User != "svc" || !ex.Result().ExpiresAt.Equal(exp) {
		t.Fatalf("good token: %v %+v", err, ex.Result())
	}
	ex, _ = New(OAuthBearer, nil, validate)
	resp, done, err := ex.Step([]byte("n,,\x01auth=Bearer bad\x01\x01"))
	if err != nil || done || !strings.Contains(string(resp), "invalid_token") {
		t.Fatalf("bad token first step: %q %v %v", resp, done, err)
	}
	if _, done, err := ex.Step([]byte("\x01")); !done || !errors.Is(err, ErrAuthentication) {
		t.Fatalf("bad token second step: %v %v", done, err)
	}
	if _, err := New(OAuthBearer, nil, nil); err == nil {
		t.Fatal("OAUTHBEARER without a validator")
	}
}

// FuzzExchanges feeds arbitrary client messages to every mechanism. The
// invariants: no panic; an exchange never reports success for a user
// without the right secret (the fuzzer cannot forge a SCRAM proof or the
// PLAIN password, so done && err == nil must never happen for SCRAM final
// or PLAIN); OAUTHBEARER succeeds only with the one valid token.
func FuzzExchanges(f *testing.F) {
	db := newDB(f)
	f.Add(uint8(0), []byte("\x00alice\x00wrong"), []byte(nil))
	f.Add(uint8(1), []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add(uint8(2), []byte("n,,n=we=2Cird=3Dname,r=x"), []byte("c=biws,r=x,p="))
	f.Add(uint8(3), []byte("n,,\x01auth=Bearer bad\x01\x01"), []byte("\x01"))
	f.Add(uint8(1), []byte("y,a=alice,n=alice,r=abc,tokenauth=false"), []byte(""))
	f.Fuzz(func(t *testing.T, which uint8, first, second []byte) {
		mech := []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer}[int(which)%4]
		ex, err := New(mech, db.lookup, func(tok string) (string, time.Time, error) {
			if tok == "the-one-valid-token" {
				return "svc", time.Time{}, nil
			}
			return "", time.Time{}, errors.New("invalid")
		})
		if err != nil {
			t.Fatal(err)
		}
		_, done, err := ex.Step(first)
		if err != nil || done {
			if err == nil && mech == Plain {
				t.Fatalf("PLAIN accepted %q", first)
			}
			if err == nil && mech == OAuthBearer && !strings.Contains(string(first), "the-one-valid-token") {
				t.Fatalf("OAUTHBEARER accepted %q", first)
			}
			return
		}
		_, done, err = ex.Step(second)
		if err == nil && done && (mech == ScramSHA256 || mech == ScramSHA512) {
			t.Fatalf("SCRAM accepted forged final %q after %q", second, first)
		}
		_, _, _ = ex.Step(second) // a third message must not panic either
	})
}

func mustB64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestScramLibrdkafkaNonce: librdkafka sends its client nonce again in
// front of the combined nonce in the final message; Kafka accepts that
// (the final nonce must end with the combined one), and so do we. A final
// nonce without the server part is refused.
func TestScramLibrdkafkaNonce(t *testing.T) {
	db := newDB(t)
	final := func(nonceOf func(cnonce, combined string) string) error {
		ex, _ := New(ScramSHA256, db.lookup, nil)
		const cnonce = "rdkafka-client-nonce"
		bare := "n=alice,r=" + cnonce
		sf, _, err := ex.Step([]byte("n,," + bare))
		if err != nil {
			return err
		}
		var combined, saltB64 string
		var iters int
		for _, a := range strings.Split(string(sf), ",") {
			switch {
			case strings.HasPrefix(a, "r="):
				combined = a[2:]
			case strings.HasPrefix(a, "s="):
				saltB64 = a[2:]
			case strings.HasPrefix(a, "i="):
				fmt.Sscan(a[2:], &iters)
			}
		}
		withoutProof := "c=biws,r=" + nonceOf(cnonce, combined)
		sp, _ := SaltPassword(ScramSHA256, "alice-secret", mustB64(saltB64), iters)
		h := hashOf(ScramSHA256)
		clientKey := mac(h, sp, []byte("Client Key"))
		st := h()
		st.Write(clientKey)
		sig := mac(h, st.Sum(nil), []byte(bare+","+string(sf)+","+withoutProof))
		proof := make([]byte, len(clientKey))
		for i := range proof {
			proof[i] = clientKey[i] ^ sig[i]
		}
		_, _, err = ex.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		return err
	}
	if err := final(func(_, combined string) string { return combined }); err != nil {
		t.Fatalf("RFC client: %v", err)
	}
	if err := final(func(c, combined string) string { return c + combined }); err != nil {
		t.Fatalf("librdkafka client: %v", err)
	}
	if err := final(func(c, _ string) string { return c }); err == nil {
		t.Fatal("a final nonce without the server nonce was accepted")
	}
}
