// The dashboard's entry point: every page module registers itself on import (in nav order
// below), then the router starts.
//
// A capability that adds a page (sagas, events, the causal trace) writes
// `pages/<name>.js` calling `registerPage` from `core.js`, imports it here, and lists the file
// in `ASSETS` in `crates/sluice-server/src/ui.rs`.

import { start } from './core.js';
import './pages/overview.js';
import './pages/queues.js';
import './pages/queue.js';
import './pages/dlqs.js';
import './pages/topics.js';
import './pages/streams.js';
import './pages/jobs.js';
import './pages/sagas.js';
import './pages/events.js';
import './pages/trace.js';
import './pages/alerts.js';

start();
