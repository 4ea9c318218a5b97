"""An independent test bed for Reflex: fleets, backgrounds and labelled faults written from
published operator reports (not from Reflex's simulator), emitted as line protocol in Reflex's
schema, and a scorer that runs ``reflex flow`` over them. See testbed/README.md."""
