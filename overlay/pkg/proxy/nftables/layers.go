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

// The nftables overlay's layers.
//
// The overlay's files are layered. A file may use what its own layer and the layers below it
// declare, never what a layer above declares. TestOverlayLayers (layers_test.go) reads this
// list and the package's references (go/packages, with types) and fails on any reference that
// goes up, and on an overlay file that no layer names. Upstream's own files are outside the
// layers: they hold the hooks that call in, and any layer may use their declarations (the
// Proxier's fields, upstream's constants). From the bottom:
//
//   - text: rule_text.go
//     nft command text and rule text: hashes, and the sets a rule names. Strings only.
//   - kernel: netlink_listing.go own_commits.go
//     the netfilter socket and its dumps; the log of kube-proxy's own commits.
//   - memory: chain_baselines.go
//     which kernel hash of a chain stands for which rule text.
//   - link: kernel_link.go
//     the per-process netlink view: tracked commits, snapshots resolved to text hashes.
//   - reader: table_reader.go
//     the only code that reads kube-proxy's table for a drift check.
//   - commit: committer.go
//     the only code that writes kube-proxy's table: a sync's transactions, in order, each
//     tracked by the link.
//   - recovery: recovery.go
//     the strategy of a sync after failed ones.
//   - planner: transactions.go
//     where a sync's operations are cut into transactions, and what each weighs.
//   - drift: drift.go
//     whether a service port's chains in the kernel are what the sync writes.
//   - records: port_records.go
//     what a service port's generation and the clean-up write, as structured values, and
//     what the drift check and the planner derive from them.
//   - known: known_objects.go
//     what the last successful sync left: each service port's chains, sets and elements.
//   - stage: affinity_resize.go affinity_shape.go rule_shapes.go service_stage.go
//     stale_cleanup.go
//     the per-service-port stage and the clean-up, and the affinity and rule shapes. They
//     are one layer for now: they still call each other both ways (methods of one stage
//     value).
//   - outside: cleanup.go doc.go proxier.go supported.go layers.go
//     upstream's files, and this one, which declares nothing.

package nftables
