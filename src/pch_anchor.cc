// Anchor so the shared precompiled headers have a target to live in.
