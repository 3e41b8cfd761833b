// memlab memory inspector. Talks only to this service's documented /v1 API; the key lives in this
// tab's sessionStorage and travels as the Authorization header (no cookies). Data is put on the page
// with textContent only, never as HTML.
(function () {
  "use strict";
  var KEY = "memlab-inspector-key";
  var USERS = "memlab-inspector-users";
  var $ = function (id) { return document.getElementById(id); };
  var state = { user: null, info: null, cursors: [null], page: 0, next: null, historyItem: null, historyNext: null };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "text") node.textContent = attrs[name];
      else if (name === "onclick") node.addEventListener("click", attrs[name]);
      else node.setAttribute(name, attrs[name]);
    });
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }

  function say(text, ok) {
    var box = $("message");
    box.textContent = "";
    if (!text) return;
    box.appendChild(el("p", { "class": "message " + (ok ? "ok" : "error"), text: text }));
  }

  function can(capability) {
    return !!(state.info && state.info.capabilities.indexOf(capability) >= 0);
  }

  // One /v1 request; resolves to the parsed body (null for 204), rejects with {status, message}.
  function api(method, path, body) {
    var headers = { "Accept": "application/json" };
    var key = sessionStorage.getItem(KEY);
    if (key) headers["Authorization"] = "Bearer " + key;
    var init = { method: method, headers: headers, credentials: "omit", cache: "no-store" };
    if (body !== undefined) { headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    return fetch(path, init).then(function (response) {
      if (response.status === 204) return null;
      return response.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (err) { data = null; }
        if (!response.ok) {
          var message = data && data.error ? data.error.message : (text || response.statusText);
          throw { status: response.status, message: message };
        }
        return data;
      });
    }, function (err) { throw { status: 0, message: "the service did not answer (" + err + ")" }; });
  }

  function userPath(suffix) {
    return "/v1/users/" + encodeURIComponent(state.user) + (suffix || "");
  }

  function failed(what) {
    return function (err) {
      var hint = err.status === 401 ? " Enter a valid API key above." : err.status === 403 ? " This key may not act for this user." : "";
      say(what + " failed (" + (err.status || "no answer") + "): " + err.message + hint, false);
    };
  }

  // ------------------------------------------------------------------ key and service
  function loadInfo() {
    return api("GET", "/v1/info").then(function (info) {
      state.info = info;
      $("service").textContent = "backend " + info.backend + " · can " + (info.capabilities.join(", ") || "nothing beyond add/search") +
        (info.persistent ? " · persistent" : " · not persistent");
      return info;
    });
  }

  $("key-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var key = $("api-key").value.trim();
    if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
    $("api-key").value = "";
    loadInfo().then(function () { say("Key accepted.", true); $("user-id").focus(); }, failed("Checking the key"));
  });
  $("key-clear").addEventListener("click", function () {
    sessionStorage.removeItem(KEY);
    state.info = null;
    $("service").textContent = "";
    closeUser();
    say("Key forgotten.", true);
  });

  // ------------------------------------------------------------------ user
  function rememberUser(user) {
    var users = JSON.parse(sessionStorage.getItem(USERS) || "[]").filter(function (u) { return u !== user; });
    users.unshift(user);
    sessionStorage.setItem(USERS, JSON.stringify(users.slice(0, 20)));
    fillUsers();
  }
  function fillUsers() {
    var list = $("recent-users");
    list.textContent = "";
    JSON.parse(sessionStorage.getItem(USERS) || "[]").forEach(function (u) { list.appendChild(el("option", { value: u })); });
  }
  function closeUser() {
    state.user = null;
    $("user-panels").classList.add("hidden");
  }

  $("user-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var user = $("user-id").value.trim();
    if (!user) return;
    (state.info ? Promise.resolve(state.info) : loadInfo()).then(function () {
      state.user = user;
      state.cursors = [null];
      state.page = 0;
      $("user-title").textContent = "User " + user;
      $("forget-confirm").value = "";
      $("forget").disabled = true;
      $("search-results").textContent = "";
      $("history-panel").classList.add("hidden");
      $("user-panels").classList.remove("hidden");
      return showPage().then(function () { rememberUser(user); say("", true); });
    }).catch(failed("Opening user " + user));
  });

  // ------------------------------------------------------------------ list (a page at a time, by cursor)
  function itemTable(items, withScore) {
    var head = el("tr", {}, [
      el("th", { scope: "col", text: "Id" }),
      withScore ? el("th", { scope: "col", "class": "num", text: "Score" }) : null,
      el("th", { scope: "col", text: "Text" }),
      el("th", { scope: "col", text: "Source" }),
      el("th", { scope: "col", text: "Actions" })
    ]);
    var body = el("tbody");
    items.forEach(function (item) { body.appendChild(itemRow(item, withScore)); });
    return el("div", { "class": "scroll" }, [el("table", { "class": "items" }, [el("thead", {}, [head]), body])]);
  }

  function describeSource(item) {
    var source = item.source || {};
    var parts = [];
    ["session_id", "turn_index", "role", "timestamp"].forEach(function (name) {
      if (source[name] !== undefined && source[name] !== null) parts.push(name.replace("_", " ") + " " + source[name]);
    });
    return parts.join(" · ");
  }

  function itemRow(item, withScore) {
    var textCell = el("td", { "class": "text", text: item.text });
    var actions = el("td", { "class": "actions" });
    var row = el("tr", { "data-item": item.id }, [
      el("th", { scope: "row" }, [el("code", { text: item.id })]),
      withScore ? el("td", { "class": "num", text: item.score === null || item.score === undefined ? "–" : Number(item.score).toFixed(3) }) : null,
      textCell,
      el("td", { text: describeSource(item) }),
      actions
    ]);
    if (can("history")) actions.appendChild(el("button", { type: "button", text: "History", "aria-label": "History of " + item.id, onclick: function () { showHistory(item.id, null); } }));
    if (can("update")) actions.appendChild(el("button", { type: "button", text: "Edit", "aria-label": "Edit " + item.id, onclick: function () { edit(textCell, item); } }));
    if (can("delete")) actions.appendChild(el("button", { type: "button", "class": "danger", text: "Delete", "aria-label": "Delete " + item.id, onclick: function () { remove(item); } }));
    return row;
  }

  function showPage() {
    var list = $("list");
    if (!can("list")) {
      list.textContent = "";
      list.appendChild(el("p", { text: "This backend cannot list its memories (no 'list' capability); search and export still work." }));
      $("page-prev").disabled = $("page-next").disabled = true;
      return Promise.resolve();
    }
    var query = "?limit=" + encodeURIComponent($("page-size").value);
    var cursor = state.cursors[state.page];
    if (cursor) query += "&cursor=" + encodeURIComponent(cursor);
    return api("GET", userPath("/memories" + query)).then(function (page) {
      state.next = page.next_cursor;
      list.textContent = "";
      list.appendChild(page.items.length ? itemTable(page.items, false) : el("p", { text: state.page ? "No more memories." : "No memories stored for this user." }));
      $("page-prev").disabled = state.page === 0;
      $("page-next").disabled = !state.next;
      $("page-info").textContent = "Page " + (state.page + 1) + " · " + page.items.length + " item(s)" + (state.next ? " · more follow" : "");
    });
  }
  $("page-next").addEventListener("click", function () {
    if (!state.next) return;
    state.cursors[state.page + 1] = state.next;
    state.page += 1;
    showPage().catch(failed("Loading the next page"));
  });
  $("page-prev").addEventListener("click", function () {
    if (state.page === 0) return;
    state.page -= 1;
    showPage().catch(failed("Loading the previous page"));
  });
  $("page-size").addEventListener("change", function () {
    if (!state.user) return;
    state.cursors = [null];
    state.page = 0;
    showPage().catch(failed("Loading memories"));
  });

  // ------------------------------------------------------------------ search
  $("search-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var body = { query: $("search-query").value };
    var k = parseInt($("search-k").value, 10);
    if (k > 0) body.k = k;
    api("POST", userPath("/search"), body).then(function (found) {
      var box = $("search-results");
      box.textContent = "";
      box.appendChild(el("p", { "class": "note", text: found.items.length + " item(s), in the order the service returned them, in " + (1000 * found.seconds).toFixed(1) + " ms (" + found.tokens + " context tokens)." }));
      if (found.items.length) box.appendChild(itemTable(found.items, true));
    }, failed("Search"));
  });
  $("search-clear").addEventListener("click", function () { $("search-results").textContent = ""; $("search-query").value = ""; });

  // ------------------------------------------------------------------ history
  function showHistory(itemId, cursor) {
    var query = cursor ? "?cursor=" + encodeURIComponent(cursor) : "";
    api("GET", userPath("/memories/" + encodeURIComponent(itemId) + "/history" + query)).then(function (page) {
      var box = $("history");
      if (!cursor) box.textContent = "";
      $("history-title").textContent = "History of " + itemId;
      if (!cursor && !page.events.length) box.appendChild(el("p", { text: "No recorded changes." }));
      var list = box.querySelector("ol") || box.appendChild(el("ol"));
      page.events.forEach(function (event) {
        var parts = Object.keys(event).map(function (name) {
          var value = event[name];
          return name + ": " + (typeof value === "object" && value !== null ? JSON.stringify(value) : value);
        });
        list.appendChild(el("li", { text: parts.join(" · ") }));
      });
      state.historyItem = itemId;
      state.historyNext = page.next_cursor;
      $("history-more").classList.toggle("hidden", !page.next_cursor);
      $("history-panel").classList.remove("hidden");
      $("history-close").focus();
    }, failed("History of " + itemId));
  }
  $("history-more").addEventListener("click", function () { if (state.historyNext) showHistory(state.historyItem, state.historyNext); });
  $("history-close").addEventListener("click", function () { $("history-panel").classList.add("hidden"); });

  // ------------------------------------------------------------------ edit, delete, restore
  function edit(cell, item) {
    cell.textContent = "";
    var area = el("textarea", { "aria-label": "New text of " + item.id });
    area.value = item.text;
    var save = el("button", { type: "button", "class": "primary", text: "Save" });
    var cancel = el("button", { type: "button", text: "Cancel" });
    cell.appendChild(area); cell.appendChild(save); cell.appendChild(cancel);
    area.focus();
    cancel.addEventListener("click", function () { cell.textContent = item.text; });
    save.addEventListener("click", function () {
      api("PATCH", userPath("/memories/" + encodeURIComponent(item.id)), { text: area.value }).then(function (updated) {
        item.text = updated.text;
        cell.textContent = updated.text;
        say("Saved " + item.id + ".", true);
      }, failed("Saving " + item.id));
    });
  }

  function remove(item) {
    if (!window.confirm("Delete memory " + item.id + "?\n\n" + item.text.slice(0, 200))) return;
    api("DELETE", userPath("/memories/" + encodeURIComponent(item.id))).then(function () {
      $("restore-id").value = item.id;
      return showPage().then(function () {
        say("Deleted " + item.id + ". To bring it back, use Restore below (where this service supports it).", true);
      });
    }).catch(failed("Deleting " + item.id));
  }

  $("restore-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var itemId = $("restore-id").value.trim();
    if (!itemId) return;
    api("POST", userPath("/memories/" + encodeURIComponent(itemId) + "/restore")).then(function () {
      return showPage().then(function () { say("Restored " + itemId + ".", true); });
    }).catch(function (err) {
      if (err.status === 404 || err.status === 405) {
        // 405: the backend cannot restore; 404: no such route on this service, or nothing to restore under that id.
        say("Cannot restore " + itemId + ": the service answered " + err.status + " (" + err.message + ").", false);
      } else {
        failed("Restoring " + itemId)(err);
      }
    });
  });

  // ------------------------------------------------------------------ export and forget
  $("export").addEventListener("click", function () {
    api("GET", userPath("/export")).then(function (data) {
      var blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
      var link = el("a", { href: URL.createObjectURL(blob), download: "memlab-export-" + state.user + ".json" });
      document.body.appendChild(link);
      link.click();
      setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
      say("Export of " + state.user + " downloaded (" + ((data.items || []).length) + " item(s)).", true);
    }, failed("Export"));
  });
  $("forget-confirm").addEventListener("input", function () {
    $("forget").disabled = $("forget-confirm").value !== state.user;
  });
  $("forget-form").addEventListener("submit", function (event) {
    event.preventDefault();
    if ($("forget-confirm").value !== state.user) return;
    var user = state.user;
    api("DELETE", userPath("")).then(function () {
      $("forget-confirm").value = "";
      $("forget").disabled = true;
      return showPage().then(function () { say("Everything stored about " + user + " was deleted.", true); });
    }).catch(failed("Forgetting " + user));
  });

  // ------------------------------------------------------------------ start
  fillUsers();
  if (sessionStorage.getItem(KEY)) loadInfo().catch(failed("Checking the stored key"));
  else loadInfo().catch(function () { /* the service needs a key: the form asks for it */ });
})();
