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

// benchTree names the tree this benchmark binary was built from.
const benchTree = "patched"

// benchConfigure sets the patched proxier's generation workers; transactions are bounded at
// the default size, as the patched kube-proxy runs.
func benchConfigure(p *Proxier, workers int) {
	p.syncWorkers = workers
	p.maxTransactionOps = 5000
}

// benchForcePool makes p's partial syncs of any size use the worker pool (on), or restores the
// proxier's own threshold (off).
func benchForcePool(p *Proxier, on bool) {
	p.minParallelPorts = 0
	if on {
		p.minParallelPorts = 1
	}
}
