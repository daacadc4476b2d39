/*
Copyright 2026 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"

	"golang.org/x/sys/unix"
)

// Reading kube-proxy's table over netlink.
//
// `nft -t list table` turns every rule back into text, and on a large table that takes seconds
// of nft's and the kernel's time, most of it printing anonymous maps. The kernel's own dump of
// the same table's chains, rules and sets takes a small fraction of that (bench/RESULTS.md,
// "Reads"). A snapshot reads that dump and reduces each chain to a hash of
// its rules as the kernel holds them (their expressions and user data, as netlink bytes).
// Those hashes cannot be compared with the rule text kube-proxy generates; chain_baselines.go
// records which kernel hash stands for which text.
//
// Anonymous sets (the `{ ... }` of upstream's numgen maps) are constant: the kernel refuses to
// change the elements of a bound one. A rule names its set, and set names can be reused once
// freed, so the hash also takes the set's handle, which the kernel never reuses in a table: a
// rule that is re-written with another set, even of the same name, hashes differently.

// Constants of linux/netfilter/nfnetlink.h and linux/netfilter/nf_tables.h.
const (
	nfnlSubsysNFTables = 10

	nftMsgGetChain = 4
	nftMsgGetRule  = 7
	nftMsgGetSet   = 10
	nftMsgGetGen   = 16

	nftaTable           = 1 // NFTA_CHAIN_TABLE, NFTA_RULE_TABLE and NFTA_SET_TABLE
	nftaChainName       = 3
	nftaRuleChain       = 2
	nftaRuleExpressions = 4
	nftaRuleUserdata    = 7
	nftaSetName         = 2
	nftaSetFlags        = 3
	nftaSetHandle       = 16
	nftaGenID           = 1
	nftaListElem        = 1
	nftaExprName        = 1
	nftaExprData        = 2
	nftaLookupSet       = 1 // also NFTA_DYNSET_SET_NAME
	nftaObjrefSetName   = 4

	nftSetAnonymous = 0x1
	nftSetMap       = 0x8
	nftSetObject    = 0x40

	nfprotoIPv4 = 2
	nfprotoIPv6 = 10

	nlaTypeMask = 0x3fff // clears NLA_F_NESTED and NLA_F_NET_BYTEORDER
)

// errTableChanged is returned by a snapshot that saw the ruleset change while it read.
var errTableChanged = errors.New("the nftables ruleset changed during the dump")

// nftNetlink is a NETLINK_NETFILTER socket.
type nftNetlink struct {
	fd  int
	seq uint32
	buf []byte
	// pieceRead, when set (by tests), is called after each piece of a dump's answer (one
	// receive) that more pieces follow, with the dump's family and message type and the
	// piece's number (from 1). The kernel makes each piece when the one before is received,
	// so whatever pieceRead commits lands inside the dump, before its third piece.
	pieceRead func(family uint8, msg uint16, piece int)
	// perChainAbove is the most chains a table may have for read to dump its rules in one
	// dump; a larger table's rules are dumped chain by chain. 0 dumps every table chain by
	// chain.
	perChainAbove int
}

// openNetfilterSocket opens a NETLINK_NETFILTER socket in the calling thread's network
// namespace.
func openNetfilterSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return -1, fmt.Errorf("opening a netfilter netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("binding a netfilter netlink socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	return fd, nil
}

// newNFTNetlink wraps the socket fd, which it then owns.
func newNFTNetlink(fd int) *nftNetlink {
	// A dump's messages come in buffers of at most 32 KiB.
	return &nftNetlink{fd: fd, buf: make([]byte, 128<<10), perChainAbove: perChainDumpAbove}
}

// close closes the socket.
func (c *nftNetlink) close() {
	_ = unix.Close(c.fd)
}

// nlAttr encodes one netlink attribute.
func nlAttr(typ uint16, data []byte) []byte {
	n := unix.NLA_HDRLEN + len(data)
	b := make([]byte, (n+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1))
	binary.NativeEndian.PutUint16(b, uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[unix.NLA_HDRLEN:], data)
	return b
}

// nlString is a NUL-terminated string attribute's payload.
func nlString(s string) []byte {
	return append([]byte(s), 0)
}

// nlAttrs calls fn for each attribute in b with its type (flags cleared) and payload, and
// returns an error if b is not a sequence of well-formed attributes.
func nlAttrs(b []byte, fn func(typ uint16, data []byte)) error {
	for len(b) >= unix.NLA_HDRLEN {
		n := int(binary.NativeEndian.Uint16(b))
		if n < unix.NLA_HDRLEN || n > len(b) {
			return fmt.Errorf("malformed netlink attribute (length %d of %d)", n, len(b))
		}
		fn(binary.NativeEndian.Uint16(b[2:])&nlaTypeMask, b[unix.NLA_HDRLEN:n])
		next := (n + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next >= len(b) {
			return nil
		}
		b = b[next:]
	}
	return nil
}

// cString returns a string attribute's payload without its terminating NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// request sends an nf_tables request of type msg for family and calls fn with the attributes of
// each message of the answer, until fn fails. With dump set it asks for a dump. It returns the
// answer's errno as an error (unix.ENOENT for a missing table), fn's error, or errTableChanged
// if the kernel marked the dump as interrupted by a commit: fn has then seen the whole answer,
// which is consistent only if that commit did not touch what the dump walks (own_commits.go).
func (c *nftNetlink) request(msg uint16, family uint8, dump bool, attrs []byte, fn func(attrs []byte) error) error {
	c.seq++
	flags := uint16(unix.NLM_F_REQUEST)
	if dump {
		flags |= unix.NLM_F_DUMP
	} else {
		flags |= unix.NLM_F_ACK
	}
	body := append([]byte{family, unix.NFNETLINK_V0, 0, 0}, attrs...)
	req := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(req, uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(req[4:], nfnlSubsysNFTables<<8|msg)
	binary.NativeEndian.PutUint16(req[6:], flags)
	binary.NativeEndian.PutUint32(req[8:], c.seq)
	req = append(req, body...)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sending a netlink request: %w", err)
	}
	var failed error
	interrupted := false
	pieces := 0
	done := func() error {
		if failed == nil && interrupted {
			return errTableChanged
		}
		return failed
	}
	for {
		n, _, rflags, _, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		if err != nil {
			return fmt.Errorf("reading a netlink answer: %w", err)
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return fmt.Errorf("a netlink answer was larger than %d bytes", len(c.buf))
		}
		b := c.buf[:n]
		for len(b) >= unix.NLMSG_HDRLEN {
			size := int(binary.NativeEndian.Uint32(b))
			if size < unix.NLMSG_HDRLEN || size > len(b) {
				return fmt.Errorf("malformed netlink message (length %d of %d)", size, len(b))
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			mflags := binary.NativeEndian.Uint16(b[6:])
			seq := binary.NativeEndian.Uint32(b[8:])
			data := b[unix.NLMSG_HDRLEN:size]
			b = b[min(len(b), (size+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):]
			if seq != c.seq {
				continue
			}
			switch {
			case typ == unix.NLMSG_DONE:
				return done()
			case typ == unix.NLMSG_ERROR:
				if len(data) < 4 {
					return errors.New("malformed netlink error")
				}
				if errno := int32(binary.NativeEndian.Uint32(data)); errno != 0 {
					return unix.Errno(-errno)
				}
				return done()
			}
			if mflags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			if failed == nil && len(data) >= 4 {
				failed = fn(data[4:])
			}
		}
		pieces++
		if dump && c.pieceRead != nil {
			c.pieceRead(family, msg, pieces)
		}
	}
}

// generation returns the ruleset's generation: the kernel adds one for every committed
// transaction in the network namespace, of any table.
func (c *nftNetlink) generation() (uint32, error) {
	var gen uint32
	found := false
	err := c.request(nftMsgGetGen, unix.AF_UNSPEC, false, nil, func(attrs []byte) error {
		return nlAttrs(attrs, func(typ uint16, data []byte) {
			if typ == nftaGenID && len(data) == 4 {
				gen, found = binary.BigEndian.Uint32(data), true
			}
		})
	})
	if err == nil && !found {
		err = errors.New("the kernel's generation answer has no generation")
	}
	return gen, err
}

// tableSnapshot is what one netlink reading found in a table.
type tableSnapshot struct {
	// gen is the ruleset generation when the reading started; in a snapshot that
	// nftLink.snapshot returns, one at which the table held what the reading found (the
	// generation when the reading ended).
	gen uint32
	// end is the ruleset generation when the reading ended, and interrupted says whether the
	// kernel marked any of its dumps as interrupted by a commit. Unless end is gen and the
	// dumps were not interrupted, the reading holds the table only if no commit in between
	// touched it (nftLink.snapshot).
	end         uint32
	interrupted bool
	// chains are the table's chains, each with kernelHash of its rules.
	chains map[string]uint64
	// sets are the table's named sets (neither anonymous nor maps), as nft lists them.
	sets []string
	// allSets counts every set of the table: named sets, maps and anonymous sets; allNamed
	// names those that are not anonymous.
	allSets  int
	allNamed []string
	// shapes are the table's chains, each with its number of rules and of references to
	// anonymous sets.
	shapes map[string]chainShape
}

// chainShape is what the kernel's dump says of a chain's rules beyond their hash.
type chainShape struct {
	rules int
	// anonRefs counts the rules' references to anonymous sets (set or map literals).
	anonRefs int
}

// setRef is one of a table's sets, as rules name it.
type setRef struct {
	handle    uint64
	anonymous bool
}

// snapshot reads the table family/table: its chains, its sets and its rules. It fails with
// errTableChanged if the ruleset changed while it read. A table that does not exist reads as
// empty.
func (c *nftNetlink) snapshot(family uint8, table string, seed maphash.Seed) (*tableSnapshot, error) {
	snap, err := c.read(family, table, seed)
	if err == nil && (snap.interrupted || snap.end != snap.gen) {
		return nil, errTableChanged
	}
	return snap, err
}

// read reads the table family/table as snapshot does, but reads on when the ruleset changes:
// the snapshot it returns has the generations at the start and end of the reading, and whether
// the kernel marked a dump as interrupted. A table that does not exist reads as empty.
func (c *nftNetlink) read(family uint8, table string, seed maphash.Seed) (*tableSnapshot, error) {
	before, err := c.generation()
	if err != nil {
		return nil, err
	}
	snap := &tableSnapshot{gen: before, chains: map[string]uint64{}, shapes: map[string]chainShape{}}
	// readOn notes an interrupted dump, whose answer is complete, and returns any other error.
	readOn := func(err error) error {
		if errors.Is(err, errTableChanged) {
			snap.interrupted = true
			return nil
		}
		return err
	}
	filter := nlAttr(nftaTable, nlString(table))
	// Every set, by name, for the rules that name them.
	sets, named, err := c.tableSets(family, table)
	if errors.Is(err, unix.ENOENT) {
		snap.end, err = c.generation()
		return snap, err
	}
	if err = readOn(err); err != nil {
		return nil, err
	}
	snap.sets, snap.allSets = named, len(sets)
	for name, set := range sets {
		if !set.anonymous {
			snap.allNamed = append(snap.allNamed, name)
		}
	}
	// The chain dump is not filtered by the kernel: keep this table's.
	err = c.request(nftMsgGetChain, family, true, nil, func(attrs []byte) error {
		var tbl, name string
		err := nlAttrs(attrs, func(typ uint16, data []byte) {
			switch typ {
			case nftaTable:
				tbl = cString(data)
			case nftaChainName:
				name = cString(data)
			}
		})
		if tbl == table {
			snap.chains[name] = kernelHashSeed(seed)
			snap.shapes[name] = chainShape{}
		}
		return err
	})
	if err = readOn(err); err != nil {
		return nil, fmt.Errorf("dumping the chains of %s: %w", table, err)
	}
	addRule := func(attrs []byte) error {
		chain, exprs, udata, err := parseRule(attrs)
		if err != nil {
			return err
		}
		h, ok := snap.chains[chain]
		if !ok {
			return nil // a chain created after the chain dump: the generation moved
		}
		var anonRefs int
		snap.chains[chain], anonRefs, err = hashKernelRule(seed, h, exprs, udata, sets)
		shape := snap.shapes[chain]
		shape.rules++
		shape.anonRefs += anonRefs
		snap.shapes[chain] = shape
		return err
	}
	if len(snap.chains) <= c.perChainAbove {
		err = readOn(c.request(nftMsgGetRule, family, true, filter, addRule))
	} else {
		for chain := range snap.chains {
			err = c.request(nftMsgGetRule, family, true, chainFilter(table, chain), addRule)
			if errors.Is(err, unix.ENOENT) {
				err = errTableChanged // deleted after the chain dump: the generation moved
			}
			if err = readOn(err); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dumping the rules of %s: %w", table, err)
	}
	snap.end, err = c.generation()
	return snap, err
}

// perChainDumpAbove is how many chains a table may have for a snapshot to dump all its rules
// in one dump. The kernel resumes such a dump, for each piece of its answer (at most 32 KiB),
// by walking the table's rules again from the first, so its time grows with the square of the
// table; a dump of one chain's rules finds the chain by name. Past this size, dumping each
// chain's rules on its own costs less (bench/RESULTS.md, "Figures behind constants").
const perChainDumpAbove = 16384

// chainFilter is the attributes of a rule dump of one chain of table.
func chainFilter(table, chain string) []byte {
	return append(nlAttr(nftaTable, nlString(table)), nlAttr(nftaRuleChain, nlString(chain))...)
}

// tableSets dumps the sets of family/table: every set by name, and the names of the named
// sets (neither anonymous nor maps), as nft lists them. A missing table fails with ENOENT.
func (c *nftNetlink) tableSets(family uint8, table string) (map[string]setRef, []string, error) {
	sets := map[string]setRef{}
	var named []string
	err := c.request(nftMsgGetSet, family, true, nlAttr(nftaTable, nlString(table)), func(attrs []byte) error {
		var name string
		var flags uint32
		var handle uint64
		err := nlAttrs(attrs, func(typ uint16, data []byte) {
			switch {
			case typ == nftaSetName:
				name = cString(data)
			case typ == nftaSetFlags && len(data) == 4:
				flags = binary.BigEndian.Uint32(data)
			case typ == nftaSetHandle && len(data) == 8:
				handle = binary.BigEndian.Uint64(data)
			}
		})
		sets[name] = setRef{handle: handle, anonymous: flags&nftSetAnonymous != 0}
		if flags&(nftSetAnonymous|nftSetMap|nftSetObject) == 0 {
			named = append(named, name)
		}
		return err
	})
	if err != nil && !errors.Is(err, unix.ENOENT) {
		err = fmt.Errorf("dumping the sets of %s: %w", table, err)
	}
	return sets, named, err
}

// parseRule returns the chain, expressions and user data of a rule message's attributes.
func parseRule(attrs []byte) (chain string, exprs, udata []byte, err error) {
	err = nlAttrs(attrs, func(typ uint16, data []byte) {
		switch typ {
		case nftaRuleChain:
			chain = cString(data)
		case nftaRuleExpressions:
			exprs = data
		case nftaRuleUserdata:
			udata = data
		}
	})
	return chain, exprs, udata, err
}

// chainHash dumps the rules of one chain of family/table and returns its kernel hash, as
// snapshot computes it (sets are the table's, from tableSets). The kernel finds the chain by
// name, so the cost does not grow with the table.
func (c *nftNetlink) chainHash(family uint8, table, chain string, seed maphash.Seed, sets map[string]setRef) (uint64, error) {
	h := kernelHashSeed(seed)
	err := c.request(nftMsgGetRule, family, true, chainFilter(table, chain), func(attrs []byte) error {
		_, exprs, udata, err := parseRule(attrs)
		if err != nil {
			return err
		}
		h, _, err = hashKernelRule(seed, h, exprs, udata, sets)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("dumping the rules of %s %s: %w", table, chain, err)
	}
	return h, nil
}

// kernelHashSeed is the kernel hash of a chain without rules.
func kernelHashSeed(seed maphash.Seed) uint64 {
	return maphash.String(seed, "chain")
}

// hashKernelRule extends the kernel hash h of a chain's rules with one rule: its expressions
// and user data as the kernel sent them, and the handle of every set that an expression names
// (from sets, the table's sets by name). It also returns how many of those names are of
// anonymous sets. It fails if the expressions are malformed.
func hashKernelRule(seed maphash.Seed, h uint64, exprs, udata []byte, sets map[string]setRef) (uint64, int, error) {
	var mh maphash.Hash
	mh.SetSeed(seed)
	var word [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(word[:], v)
		_, _ = mh.Write(word[:])
	}
	put(h)
	put(uint64(len(exprs)))
	_, _ = mh.Write(exprs)
	put(uint64(len(udata)))
	_, _ = mh.Write(udata)
	var inner error
	anonRefs := 0
	err := nlAttrs(exprs, func(typ uint16, elem []byte) {
		if typ != nftaListElem {
			return
		}
		var name string
		var data []byte
		if err := nlAttrs(elem, func(typ uint16, b []byte) {
			switch typ {
			case nftaExprName:
				name = cString(b)
			case nftaExprData:
				data = b
			}
		}); err != nil {
			inner = err
			return
		}
		setAttr := uint16(0)
		switch name {
		case "lookup", "dynset":
			setAttr = nftaLookupSet
		case "objref":
			setAttr = nftaObjrefSetName
		default:
			return
		}
		if err := nlAttrs(data, func(typ uint16, b []byte) {
			if typ == setAttr {
				ref := sets[cString(b)]
				put(ref.handle)
				if ref.anonymous {
					anonRefs++
				}
			}
		}); err != nil {
			inner = err
		}
	})
	if err == nil {
		err = inner
	}
	return mh.Sum64(), anonRefs, err
}
