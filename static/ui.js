// At-a-glance enhancements; every page works without this file (CSP: script-src 'self').
//  - sortable tables (th[data-sort] > button.sort);
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
    var button = document.createElement("button");
    button.type = "button";
    button.className = "fold-toggle";
    var label = function () {
      button.textContent = table.classList.contains("collapsed") ? "Show all " + total + " topics" : "Show the first " + n;
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
    verdict.scrollIntoView({ block: "nearest" });
  }

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
  document.addEventListener("htmx:load", function () {
    document.querySelectorAll("table[data-fold]").forEach(setupFold);
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
