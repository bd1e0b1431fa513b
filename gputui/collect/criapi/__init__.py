"""Any CRI runtime's containers (CRI-O, or containerd's CRI plugin), read through the CRI API."""
