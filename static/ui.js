// At-a-glance enhancements; every page works without this file (CSP: script-src 'self').
//  - sortable tables (th[data-sort] > button.sort); a table wider than its box as stacked rows;
//  - keyboard: focus moves to the feedback after Submit; 1-9 pick a choice, Enter submits,
//    n goes to the next question, ? lists the shortcuts;
//  - an exercise's result is scrolled to and announced when it arrives;
//  - the question editor shows only the fields of the chosen type.
(function () {
  "use strict";

  // ---- Sortable tables --------------------------------------------------------------------
  function sortBy(th) {
    var table = th.closest("table");
    var body = table.tBodies[0];
    var index = Array.prototype.indexOf.call(th.parentElement.children, th);
    var numeric = th.dataset.sort === "num";
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.children[index].dataset.value, y = b.children[index].dataset.value;
      var d = numeric ? (parseFloat(x) || 0) - (parseFloat(y) || 0) : String(x).localeCompare(String(y));
      return ascending ? d : -d;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    refold(table);
  }

  // A long table shows its first data-fold rows (after any sort) and a button for the rest.
  function refold(table) {
    var n = Number(table.dataset.fold);
    if (!n) return;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r, i) { r.classList.toggle("more", i >= n); });
  }
  function setupFold(table) {
    var n = Number(table.dataset.fold), total = table.tBodies[0].rows.length;
    if (!n || total <= n || table.dataset.folded) return;
    table.dataset.folded = "1";
    table.classList.add("collapsed");
    refold(table);
    var button = document.createElement("button");
    button.type = "button";
    button.className = "fold-toggle";
    var label = function () {
      button.textContent = table.classList.contains("collapsed")
        ? "Show all " + total + " " + (table.dataset.foldNoun || "topics") : "Show the first " + n;
      button.setAttribute("aria-expanded", String(!table.classList.contains("collapsed")));
    };
    button.addEventListener("click", function () { table.classList.toggle("collapsed"); label(); });
    label();
    (table.closest(".table-scroll") || table).insertAdjacentElement("afterend", button);
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("th[data-sort] > button.sort");
    if (button) sortBy(button.parentElement);
  });

  // ---- Tables that fit ----------------------------------------------------------------------
  // A table wider than the box it sits in is laid out as stacked rows: one block per row, each
  // cell under its column's name (data-label, from the header). No column is ever hidden in a
  // sideways scroll. Checked again when the window changes size, when a fold opens and when htmx
  // brings new content.
  function headerNames(table) {
    var head = table.tHead;
    if (!head || !head.rows.length) return [];
    var names = [];
    Array.prototype.forEach.call(head.rows[head.rows.length - 1].cells, function (cell) {
      var text = (cell.dataset.label || cell.textContent).replace(/\s+/g, " ").trim();
      for (var k = 0; k < (cell.colSpan || 1); k++) names.push(text);
    });
    return names;
  }
  function labelCells(table) {
    var names = headerNames(table);
    Array.prototype.forEach.call(table.tBodies, function (body) {
      Array.prototype.forEach.call(body.rows, function (row) {
        var col = 0;
        Array.prototype.forEach.call(row.cells, function (cell) {
          if (!cell.hasAttribute("data-label") && names[col]) cell.setAttribute("data-label", names[col]);
          col += cell.colSpan || 1;
        });
      });
    });
  }
  function fits(table) {
    return table.getBoundingClientRect().width <= table.parentElement.clientWidth + 1;
  }
  // Columns marked th.opt are the ones a narrow screen can do without: they go first, behind
  // a button that names them; only a table that still does not fit is stacked.
  function optionalColumns(table) {
    var head = table.tHead, names = [], index = [];
    if (!head || !head.rows.length) return { names: names, index: index };
    var col = 0;
    Array.prototype.forEach.call(head.rows[head.rows.length - 1].cells, function (cell) {
      if (cell.classList.contains("opt")) {
        names.push(cell.textContent.replace(/\s+/g, " ").trim());
        for (var k = 0; k < (cell.colSpan || 1); k++) index.push(col + k);
      }
      col += cell.colSpan || 1;
    });
    Array.prototype.forEach.call(table.tBodies, function (body) {
      Array.prototype.forEach.call(body.rows, function (row) {
        var c = 0;
        Array.prototype.forEach.call(row.cells, function (cell) {
          if (index.indexOf(c) >= 0) cell.classList.add("opt");
          c += cell.colSpan || 1;
        });
      });
    });
    return { names: names, index: index };
  }
  function columnsToggle(table, names) {
    var box = table.closest(".table-scroll") || table;
    var button = box.previousElementSibling;
    if (!names) { if (button && button.classList.contains("columns-toggle")) button.remove(); return; }
    if (!button || !button.classList.contains("columns-toggle")) {
      button = document.createElement("button");
      button.type = "button";
      button.className = "columns-toggle";
      button.addEventListener("click", function () {
        table.dataset.allColumns = table.dataset.allColumns ? "" : "1";
        fitTable(table);
      });
      box.insertAdjacentElement("beforebegin", button);
    }
    var all = !!table.dataset.allColumns;
    button.textContent = all ? "Show fewer columns" : "Show " + names.length + " more column" +
      (names.length === 1 ? "" : "s") + ": " + names.join(", ");
    button.setAttribute("aria-expanded", String(all));
  }
  function fitTable(table) {
    if (table.closest("svg") || !table.getClientRects().length) return;
    table.classList.remove("stacked", "lean");
    var opt = optionalColumns(table);
    if (fits(table)) { columnsToggle(table, table.dataset.allColumns ? opt.names : null); return; }
    if (opt.names.length) {
      columnsToggle(table, opt.names);
      if (!table.dataset.allColumns) {
        table.classList.add("lean");
        if (fits(table)) return;
        table.classList.remove("lean");
      }
    }
    labelCells(table);
    table.classList.add("stacked");
  }
  // A picture (or a table that still does not fit) scrolls in its own box: say so above it.
  function noteScroll(box) {
    if (!box.getClientRects().length) return;
    var wide = box.scrollWidth > box.clientWidth + 1;
    var note = box.previousElementSibling;
    var has = note && note.classList.contains("scroll-note");
    if (wide && !has) {
      note = document.createElement("p");
      note.className = "hint scroll-note";
      note.textContent = box.querySelector("table") ? "This table is wider than the screen: scroll it sideways."
        : "This picture is wider than the screen: scroll it sideways.";
      box.insertAdjacentElement("beforebegin", note);
    } else if (!wide && has) {
      note.remove();
    }
    if (wide) box.dataset.scrolls = "sideways"; else delete box.dataset.scrolls;
  }
  function fitTables(root) {
    root = root || document;
    if (root.matches && root.matches("table")) fitTable(root);
    root.querySelectorAll("table").forEach(fitTable);
    root.querySelectorAll(".svg-scroll, .table-scroll").forEach(noteScroll);
  }
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () { fitTables(); }, 100);
  });
  // A table inside a closed fold has no width until the fold opens.
  document.addEventListener("toggle", function (event) {
    if (event.target.open) fitTables(event.target);
  }, true);

  // ---- Keyboard ---------------------------------------------------------------------------
  var SHORTCUTS = [
    ["1 – 9", "pick that choice (a, b, c…)"],
    ["Enter", "submit your answer"],
    ["n", "next question (or next due card)"],
    ["?", "show or hide this list"],
    ["Esc", "close this list"],
  ];

  function typing(el) {
    if (!el || el === document.body) return false;
    if (el.isContentEditable || el.closest(".CodeMirror")) return true;
    var tag = el.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    if (tag !== "INPUT") return false;
    return !/^(radio|checkbox|button|submit|reset)$/.test(el.type);
  }

  function answerForm() {
    var form = document.getElementById("answer-form");
    return form && document.contains(form) ? form : null;
  }

  function nextLink() {
    return document.querySelector("section.graded a.button.primary, a.next-question, .next-exercise a");
  }

  function shortcutsPanel() {
    var panel = document.getElementById("shortcuts");
    if (panel) return panel;
    panel = document.createElement("section");
    panel.id = "shortcuts";
    panel.className = "shortcuts";
    panel.setAttribute("role", "dialog");
    panel.setAttribute("aria-label", "Keyboard shortcuts");
    panel.hidden = true;
    var h = document.createElement("h2");
    h.textContent = "Keyboard shortcuts";
    h.tabIndex = -1;
    var dl = document.createElement("dl");
    SHORTCUTS.forEach(function (pair) {
      var dt = document.createElement("dt"), dd = document.createElement("dd"), k = document.createElement("kbd");
      k.textContent = pair[0];
      dt.appendChild(k);
      dd.textContent = pair[1];
      dl.appendChild(dt);
      dl.appendChild(dd);
    });
    var close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.addEventListener("click", function () { toggleShortcuts(false); });
    panel.appendChild(h);
    panel.appendChild(dl);
    panel.appendChild(close);
    document.body.appendChild(panel);
    return panel;
  }

  var opener = null;
  function toggleShortcuts(show) {
    var panel = shortcutsPanel();
    show = show === undefined ? panel.hidden : show;
    if (show) { opener = document.activeElement; panel.hidden = false; panel.querySelector("h2").focus(); }
    else { panel.hidden = true; if (opener && document.contains(opener)) opener.focus(); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var el = document.activeElement;
    if (event.key === "Escape") {
      var panel = document.getElementById("shortcuts");
      if (panel && !panel.hidden) { toggleShortcuts(false); event.preventDefault(); }
      return;
    }
    if (typing(el)) return;
    var form = answerForm();
    if (event.key === "?") { toggleShortcuts(); event.preventDefault(); return; }
    if (/^[1-9]$/.test(event.key) && form) {
      var inputs = form.querySelectorAll("input[name=answer][type=radio], input[name=answer][type=checkbox]");
      var input = inputs[Number(event.key) - 1];
      if (!input) return;
      if (input.type === "radio") input.checked = true; else input.checked = !input.checked;
      input.dispatchEvent(new Event("change", { bubbles: true }));
      input.focus();
      event.preventDefault();
      return;
    }
    if (event.key === "Enter" && form && (!el || el === document.body || (el.tagName === "INPUT" && form.contains(el)))) {
      var submit = form.querySelector("button[type=submit]:not([name])") || form.querySelector("button[type=submit]");
      form.requestSubmit(submit);
      event.preventDefault();
      return;
    }
    if ((event.key === "n" || event.key === "N") && !form) {
      var link = nextLink();
      if (link) { link.click(); event.preventDefault(); }
    }
  });

  // After Submit the graded answer replaces the form: focus its verdict, so the keyboard
  // (and a screen reader) starts from the feedback, not from the top of the page.
  function focusFeedback(root) {
    var verdict = (root || document).querySelector("section.graded #verdict, section.graded h2");
    if (!verdict) return;
    verdict.tabIndex = -1;
    verdict.focus({ preventScroll: true });
    // The verdict at the top of the screen, and under it the Verify control: both in view.
    verdict.scrollIntoView({ block: "start" });
  }

  // Verify pressed: the run's status line (and then its result) comes into view where it
  // appears, below the panel's knobs.
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.id === "verify-result" && target.querySelector(".run")) {
      target.scrollIntoView({ block: "start", behavior: "smooth" });
    }
  });

  // An exercise's result: scroll to it and move the keyboard there once it is finished.
  function showResult() {
    var done = document.querySelector("#submission[data-status=done]");
    if (!done || done.dataset.shown) return;
    done.dataset.shown = "1";
    var head = done.querySelector(".result-headline") || done;
    head.tabIndex = -1;
    head.focus({ preventScroll: true });
    done.scrollIntoView({ block: "start", behavior: "smooth" });
  }

  var answering = false;
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    // Other requests (the header's due count) go out meanwhile: they leave the flag alone.
    if (elt && (elt.closest("#answer-form") || elt.getAttribute("hx-target") === "#answer-area")) answering = true;
  });
  // htmx:load fires on the new content itself: the element that asked (the form, the polling
  // result) has been swapped out by then, so events on it never reach the document.
  document.addEventListener("htmx:load", function (event) {
    document.querySelectorAll("table[data-fold]").forEach(setupFold);
    fitTables(event.target);
    if (answering && document.querySelector("#answer-area section.graded")) {
      answering = false;
      focusFeedback(document.getElementById("answer-area"));
    }
    showResult();
  });

  // ---- The question editor: only the fields of the chosen type ------------------------------
  function showFieldsFor(select) {
    var type = select.value;
    var format = document.getElementById("f-answer-format");
    var fmt = type === "trace" && format && format.value ? format.value : type;
    document.querySelectorAll("[data-for-types]").forEach(function (el) {
      var types = el.dataset.forTypes.split(" ");
      el.hidden = types.indexOf(type) < 0 && types.indexOf("fmt:" + fmt) < 0;
    });
  }
  document.addEventListener("change", function (event) {
    if (event.target.id === "f-type" || event.target.id === "f-answer-format") {
      showFieldsFor(document.getElementById("f-type"));
    }
  });

  function setup() {
    document.querySelectorAll("table[data-fold]").forEach(setupFold);
    fitTables();
    var type = document.getElementById("f-type");
    if (type) showFieldsFor(type);
    showResult();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();

// Printing a report prints every folded section too.
window.addEventListener("beforeprint", function () {
  document.querySelectorAll("details").forEach(function (d) { d.dataset.wasOpen = d.open ? "1" : ""; d.open = true; });
});
window.addEventListener("afterprint", function () {
  document.querySelectorAll("details[data-was-open]").forEach(function (d) { d.open = d.dataset.wasOpen === "1"; });
});
