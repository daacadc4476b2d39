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
const benchTree = "upstream"

// benchConfigure leaves the upstream proxier as it is: it generates serially.
func benchConfigure(p *Proxier, workers int) {
	if workers != 1 {
		panic("upstream generates serially; measure it with 1 worker")
	}
}

// benchForcePool does nothing: upstream has no pool.
func benchForcePool(*Proxier, bool) {}
