"""Docker adapter: endpoint, container list and inspect (kept fresh by events), parsing, exec."""
