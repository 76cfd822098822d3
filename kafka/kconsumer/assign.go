package kconsumer

import "sort"

// The server-side assignors of KIP-848. Both are deterministic functions of
// the members' subscriptions (and, for uniform, the previous target).

type tp struct {
	topic TopicID
	name  string
	p     int32
}

// assignUniform spreads every subscribed partition over the members
// subscribed to its topic so that counts differ by at most one where the
// subscriptions allow it, keeping each member's previous partitions as far
// as that balance permits (sticky, like Kafka's uniform assignor).
func assignUniform(subs map[string][]Topic, prev map[string]Assignment) map[string]Assignment {
	ids := make([]string, 0, len(subs))
	for id := range subs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make(map[string]Assignment, len(ids))
	for _, id := range ids {
		out[id] = Assignment{}
	}
	if len(ids) == 0 {
		return out
	}
	// Every partition and who may take it.
	subscribers := map[TopicID][]string{}
	topics := map[TopicID]Topic{}
	for _, id := range ids {
		for _, t := range subs[id] {
			subscribers[t.ID] = append(subscribers[t.ID], id)
			topics[t.ID] = t
		}
	}
	var all []tp
	for id, t := range topics {
		for p := int32(0); p < t.Partitions; p++ {
			all = append(all, tp{topic: id, name: t.Name, p: p})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].name != all[j].name {
			return all[i].name < all[j].name
		}
		return all[i].p < all[j].p
	})
	total := len(all)
	floor, extra := total/len(ids), total%len(ids)
	may := func(id string, t TopicID) bool {
		for _, s := range subscribers[t] {
			if s == id {
				return true
			}
		}
		return false
	}
	// Pass 1: each member keeps up to floor of its previous partitions,
	// then up to `extra` members keep one more.
	taken := map[tp]bool{}
	count := map[string]int{}
	keep := func(id string, limit int) {
		for _, x := range all {
			if count[id] >= limit {
				return
			}
			if !taken[x] && prev[id].has(x.topic, x.p) && may(id, x.topic) {
				out[id].add(x.topic, x.p)
				taken[x] = true
				count[id]++
			}
		}
	}
	for _, id := range ids {
		keep(id, floor)
	}
	for _, id := range ids {
		if extra == 0 {
			break
		}
		before := count[id]
		keep(id, floor+1)
		if count[id] > before {
			extra--
		}
	}
	// Pass 2: the rest to the least loaded subscriber, partitions with the
	// fewest possible owners first (so heterogeneous subscriptions still
	// balance).
	sort.SliceStable(all, func(i, j int) bool { return len(subscribers[all[i].topic]) < len(subscribers[all[j].topic]) })
	for _, x := range all {
		if taken[x] {
			continue
		}
		best := ""
		for _, id := range subscribers[x.topic] {
			if best == "" || count[id] < count[best] || (count[id] == count[best] && id < best) {
				best = id
			}
		}
		out[best].add(x.topic, x.p)
		count[best]++
	}
	return out
}

// assignRange gives each member a contiguous range of every topic it
// subscribes to: members subscribed to a topic in id order, each gets
// n/m partitions and the first n%m one more (so co-partitioned topics line
// up, as with the classic range assignor).
func assignRange(subs map[string][]Topic) map[string]Assignment {
	out := make(map[string]Assignment, len(subs))
	byTopic := map[TopicID][]string{}
	topics := map[TopicID]Topic{}
	for id, ts := range subs {
		out[id] = Assignment{}
		for _, t := range ts {
			byTopic[t.ID] = append(byTopic[t.ID], id)
			topics[t.ID] = t
		}
	}
	for tid, members := range byTopic {
		sort.Strings(members)
		n, m := int(topics[tid].Partitions), len(members)
		next := 0
		for i, id := range members {
			k := n / m
			if i < n%m {
				k++
			}
			for j := 0; j < k; j++ {
				out[id].add(tid, int32(next))
				next++
			}
		}
	}
	return out
}
