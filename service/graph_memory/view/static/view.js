// graph-memory view: a read-only page over the JSON reads of graph_memory/view/app.py.
// Every stored string reaches the DOM through textContent (el() below) or as cytoscape data drawn on
// a canvas, never parsed as HTML, so an observation holding markup stays text.
"use strict";

(function () {
  const main = document.getElementById("main");
  const form = document.getElementById("search-form");
  const input = document.getElementById("search-input");
  const modeSelect = document.getElementById("search-mode");
  const state = { cy: null, request: 0 };
  window.graphMemoryView = state; // for tests and the console: the cytoscape instance of the page

  // el("a", {href: "#/"}, "text", child…): attributes are set as properties, children as text nodes.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "dataset") Object.assign(node.dataset, value);
      else node[key] = value;
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : text(String(child)));
    }
    return node;
  }

  const PAGE_ITEMS = 200; // items of each list per entity page (ENTITY_PAGE_ITEMS in browse.py)
  const MAX_RESULTS = 200; // the most results one search answers (MAX_SEARCH_RESULTS in browse.py)

  // A string holding bidi controls (an unclosed U+202E would reverse the text after it) goes in a
  // <bdi> of its own, so it cannot reorder its neighbours (found by QA); other strings are text.
  const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/;
  function text(value) {
    if (!BIDI_CONTROLS.test(value)) return document.createTextNode(value);
    const isolated = document.createElement("bdi");
    isolated.textContent = value;
    return isolated;
  }

  function api(path, params) {
    const url = new URL(path, document.baseURI);
    for (const [key, value] of Object.entries(params || {})) url.searchParams.set(key, String(value));
    return fetch(url, { headers: { accept: "application/json" }, credentials: "same-origin" }).then(async (r) => {
      const body = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
      if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
      return body;
    });
  }

  // Colours by entity type: a stable hue from the type's text.
  function typeColor(type) {
    if (type === null || type === undefined) return "#8a93a3";
    let h = 0;
    for (const ch of String(type)) h = (h * 31 + ch.codePointAt(0)) >>> 0;
    return `hsl(${h % 360}, 55%, 42%)`;
  }

  function typeBadge(type) {
    const badge = el("span", { className: "type" }, type === null || type === undefined ? "no entity" : type);
    badge.style.backgroundColor = typeColor(type);
    return badge;
  }

  function entityHref(name) {
    return "#/entity?name=" + encodeURIComponent(name);
  }

  function entityLink(name) {
    return el("a", { href: entityHref(name), className: "entity-link" }, name);
  }

  function plural(n, one, many) {
    return `${n.toLocaleString()} ${n === 1 ? one : many || one + "s"}`;
  }

  function show(...nodes) {
    if (state.cy) { state.cy.destroy(); state.cy = null; }
    main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  }

  function showError(message) {
    show(el("p", { className: "error", role: "alert" }, message));
  }

  // -- routes: #/ (overview), #/search?q=&mode=, #/entity?name=&hops=&from= ------------------------

  function route() {
    const hash = location.hash.replace(/^#/, "") || "/";
    const [path, query] = hash.split("?", 2);
    const params = new URLSearchParams(query || "");
    const ticket = ++state.request; // a slower earlier answer never replaces a later page
    const render = (fn) => (data) => { if (ticket === state.request) fn(data, params); };
    const fail = (err) => { if (ticket === state.request) showError(err.message); };
    if (path === "/search") {
      input.value = params.get("q") || "";
      modeSelect.value = params.get("mode") || "substring";
      const limit = params.get("limit") === String(MAX_RESULTS) ? MAX_RESULTS : 50;
      api("api/search", { q: input.value, mode: modeSelect.value, limit }).then(render(renderSearch), fail);
    } else if (path === "/entity") {
      const hops = params.get("hops") === "2" ? 2 : 1;
      const name = params.get("name") || "";
      const from = Math.max(0, Number.parseInt(params.get("from") || "0", 10) || 0);
      Promise.all([api("api/entity", { name, offset: from }), api("api/neighborhood", { name, hops, limit: 40 })])
        .then(render(([entity, area]) => renderEntity(entity, area, hops)), fail);
    } else {
      api("api/overview", params.get("fresh") === "1" ? { fresh: 1 } : {}).then(render(renderOverview), fail);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams({ q: input.value, mode: modeSelect.value });
    location.hash = "#/search?" + params.toString();
  });
  window.addEventListener("hashchange", route);

  // -- overview ----------------------------------------------------------------------------------

  function countTable(rows, label) {
    const body = rows.map((r) => el("tr", {}, el("td", {}, r.type), el("td", { className: "num" }, r.count.toLocaleString())));
    return el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, label), el("th", {}, "count"))), el("tbody", {}, ...body));
  }

  function renderOverview(data) {
    document.title = "graph-memory";
    const t = data.totals;
    const totals = el("div", { className: "totals", id: "totals" },
      el("div", {}, el("b", {}, t.entities.toLocaleString()), "entities"),
      el("div", {}, el("b", {}, t.observations.toLocaleString()), "observations"),
      el("div", {}, el("b", {}, t.relations.toLocaleString()), "relations"));
    const connected = el("ol", { id: "most-connected" }, ...data.mostConnected.map((c) =>
      el("li", {}, c.entityType === null ? c.name : entityLink(c.name), typeBadge(c.entityType),
        el("span", { className: "weight" }, " " + plural(c.degree, "relation")))));
    const recent = el("ul", { className: "plain", id: "recent" }, ...data.recent.map((c) => {
      const what = c.kind === "entity" ? ["new entity ", entityLink(c.entity)]
        : c.kind === "observation" ? [entityLink(c.entity), ": ", el("span", { className: "snippet" }, c.text)]
          : [entityLink(c.entity), ` —${c.text}→ `, entityLink(c.other)];
      return el("li", {}, ...what, el("time", { className: "when", dateTime: c.at }, c.at.replace("T", " ").slice(0, 19)));
    }));
    const counted = el("p", { className: "note", id: "counted" }, `counted ${data.countedAt.replace("T", " ").replace("Z", " UTC")}`,
      data.stale ? " · the memory changed since: " : "", data.stale ? el("a", { href: "#/?fresh=1" }, "count again") : null);
    show(el("h1", {}, "Your memory"), totals, counted, el("div", { className: "grid" },
      el("section", { className: "card" }, el("h2", {}, "Entity types"), countTable(data.entityTypes, "type")),
      el("section", { className: "card" }, el("h2", {}, "Relation types"), countTable(data.relationTypes, "type")),
      el("section", { className: "card" }, el("h2", {}, "Most connected"), connected),
      el("section", { className: "card" }, el("h2", {}, "Latest additions"), recent)));
  }

  // -- search ------------------------------------------------------------------------------------

  function renderSearch(data) {
    document.title = `${data.query} · graph-memory`;
    const items = data.results.map((hit) => {
      const snippet = el("div", { className: "snippet" });
      if (hit.field && hit.field !== "observation") snippet.append(el("span", { className: "note" }, `in ${hit.field}: `));
      for (const piece of hit.snippet) snippet.append(piece.hit ? el("mark", {}, piece.text) : piece.text);
      return el("li", {}, entityLink(hit.name), typeBadge(hit.entityType),
        el("span", { className: "weight" }, " " + plural(hit.observations, "observation")), snippet);
    });
    const heading = el("h1", {}, `${data.results.length}${data.more ? "+" : ""} ${data.results.length === 1 && !data.more ? "result" : "results"} for “`,
      data.query, `” (${data.mode})`);
    show(heading, items.length ? el("ul", { className: "plain", id: "results" }, ...items)
      : el("p", { className: "note", id: "results" }, "Nothing found."),
    data.more ? moreResults(data) : null);
  }

  function moreResults(data) {
    if (data.results.length >= MAX_RESULTS) return el("p", { className: "note" }, "More entities match: refine the query to see them.");
    const params = new URLSearchParams({ q: data.query, mode: data.mode, limit: String(MAX_RESULTS) });
    return el("p", { className: "note" }, "More entities match: ",
      el("a", { href: "#/search?" + params.toString(), id: "more-results" }, `show up to ${MAX_RESULTS}`), ", or refine the query.");
  }

  // -- entity ------------------------------------------------------------------------------------

  function relationTable(relations, direction, types) {
    if (!relations.length) return el("p", { className: "note" }, "none");
    const rows = relations.map((r) => {
      const other = direction === "out" ? r.to : r.from;
      // Own keys only: a dangling end named "constructor" is no entity (found by QA)
      const known = Object.hasOwn(types, other);
      return el("tr", {}, el("td", {}, r.relationType),
        el("td", {}, known ? entityLink(other) : el("span", { title: "no entity has this name" }, other),
          known ? typeBadge(types[other]) : null),
        el("td", { className: "num weight" }, Number(r.weight).toFixed(2)));
    });
    const table = el("table", { className: `relations-${direction}` },
      el("thead", {}, el("tr", {}, el("th", {}, "relation"), el("th", {}, direction === "out" ? "to" : "from"), el("th", {}, "weight"))),
      el("tbody", {}, ...rows));
    return table;
  }

  // Which items of a list of `total` this page shows ("201–400 of 5,000"), when not all of them.
  function shownOf(count, total, offset) {
    if (offset === 0 && count >= total) return null;
    const range = count ? `${(offset + 1).toLocaleString()}–${(offset + count).toLocaleString()}` : "none";
    return el("p", { className: "note" }, `${range} of ${total.toLocaleString()} shown`);
  }

  // Links to the pages before and after this one (ENTITY_PAGE_ITEMS of each list per page).
  function pager(entity, size) {
    const longest = Math.max(entity.observationsTotal, entity.outgoingTotal, entity.incomingTotal);
    if (entity.offset === 0 && longest <= size) return null;
    const at = (from) => entityHref(entity.name) + (from > 0 ? `&from=${from}` : "");
    return el("p", { className: "pager" },
      entity.offset > 0 ? el("a", { href: at(Math.max(0, entity.offset - size)), rel: "prev" }, `← previous ${size}`) : null,
      ` items ${(entity.offset + 1).toLocaleString()}–${Math.min(entity.offset + size, longest).toLocaleString()} of each list `,
      entity.offset + size < longest ? el("a", { href: at(entity.offset + size), rel: "next" }, `next ${size} →`) : null);
  }

  function renderEntity(entity, area, hops) {
    document.title = `${entity.name} · graph-memory`;
    const observations = el("ul", { className: "plain observations", id: "observations" }, ...entity.observations.map((o) =>
      el("li", {}, o.content, el("time", { dateTime: o.createdAt }, o.createdAt.replace("T", " ").slice(0, 19)))));
    const info = el("section", { className: "card" },
      el("h1", { id: "entity-name" }, entity.name, typeBadge(entity.entityType)),
      el("p", { className: "note" }, `created ${entity.createdAt.replace("T", " ").slice(0, 19)} · updated ${entity.updatedAt.replace("T", " ").slice(0, 19)}`),
      pager(entity, PAGE_ITEMS),
      el("h2", {}, plural(entity.observationsTotal, "observation")),
      entity.observations.length ? observations : el("p", { className: "note" }, "none"),
      shownOf(entity.observations.length, entity.observationsTotal, entity.offset),
      el("h2", {}, `Relations out (${entity.outgoingTotal.toLocaleString()})`),
      relationTable(entity.outgoing, "out", entity.neighborTypes),
      shownOf(entity.outgoing.length, entity.outgoingTotal, entity.offset),
      el("h2", {}, `Relations in (${entity.incomingTotal.toLocaleString()})`),
      relationTable(entity.incoming, "in", entity.neighborTypes),
      shownOf(entity.incoming.length, entity.incomingTotal, entity.offset),
      pager(entity, PAGE_ITEMS));
    const hopLink = (n) => el("a", { href: entityHref(entity.name) + (n === 2 ? "&hops=2" : ""), className: n === hops ? "on" : "" }, `${n} hop${n === 2 ? "s" : ""}`);
    const more = [];
    if (area.truncated) more.push(`capped at ${area.nodes.length} entities`);
    if (area.hidden) more.push(`${area.hidden.toLocaleString()} more relations not drawn`);
    const canvas = el("div", { id: "graph", role: "img", ariaLabel: `neighbourhood of ${entity.name}` });
    const nodeList = el("ul", { className: "visually-hidden", id: "graph-nodes" }, ...area.nodes.map((n) => el("li", {}, n.name)));
    const types = [...new Set(area.nodes.map((n) => n.entityType))];
    const graphCard = el("section", { className: "card" },
      el("div", { className: "graph-bar" }, el("strong", {}, "Neighbourhood"), hopLink(1), hopLink(2),
        el("span", { className: "note", id: "graph-more" }, more.join(" · "))),
      canvas, nodeList, el("div", { className: "legend" }, ...types.map(typeBadge)));
    show(el("div", { className: "entity" }, info, graphCard));
    drawGraph(canvas, area, entity.name);
  }

  function drawGraph(container, area, center) {
    if (typeof window.cytoscape !== "function") {
      container.append(el("p", { className: "error" }, "the graph library did not load"));
      return;
    }
    const elements = [];
    for (const n of area.nodes) {
      const label = n.hidden > 0 ? `${n.name} (+${n.hidden})` : n.name;
      elements.push({ group: "nodes", data: { id: "n:" + n.name, name: n.name, label, color: typeColor(n.entityType), center: n.name === center ? 1 : 0, hops: n.hops, entity: n.entityType === null ? 0 : 1 } });
    }
    area.relations.forEach((r, i) => {
      elements.push({ group: "edges", data: { id: "e" + i, source: "n:" + r.from, target: "n:" + r.to, label: r.relationType } });
    });
    state.cy = window.cytoscape({
      container,
      elements,
      // rings around the entity by distance: readable for a neighbourhood, and the same picture every time
      layout: { name: "concentric", concentric: (node) => 10 - node.data("hops"), levelWidth: () => 1,
        minNodeSpacing: 40, spacingFactor: 1.1, animate: false, padding: 30 },
      minZoom: 0.2,
      maxZoom: 1.5,
      style: [
        { selector: "node", style: { "background-color": "data(color)", label: "data(label)", "font-size": 11, color: "#1d2330", "text-valign": "bottom", "text-margin-y": 4, "text-max-width": 140, "text-wrap": "ellipsis", width: 18, height: 18 } },
        { selector: "node[center = 1]", style: { width: 30, height: 30, "border-width": 3, "border-color": "#1d2330", "font-weight": "bold" } },
        { selector: "edge", style: { width: 1.4, "line-color": "#a9b1bd", "target-arrow-color": "#a9b1bd", "target-arrow-shape": "triangle", "curve-style": "bezier", label: "data(label)", "font-size": 9, color: "#5b6472", "text-rotation": "autorotate", "text-background-color": "#fbfcfd", "text-background-opacity": 1 } },
      ],
    });
    state.cy.on("tap", "node", (event) => {
      const node = event.target;
      if (node.data("entity") === 1 && node.data("center") !== 1) location.hash = entityHref(node.data("name"));
    });
  }

  route();
})();
