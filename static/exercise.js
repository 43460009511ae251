// The exercise page: CodeMirror over the code textarea (the textarea stays the form field,
// and is what you get without JavaScript), "Reset to starter", and keeping the editor's
// text in the form before htmx sends it.
(function () {
  "use strict";
  function setup() {
    var area = document.getElementById("code");
    if (!area) return;
    var starter = document.getElementById(area.dataset.starterId);
    var starterText = starter ? starter.content.textContent : area.value;
    var form = area.form;
    var resetButton = form.querySelector(".reset-starter");
    var runButton = form.querySelector(".run-button");
    var editor = null;
    if (window.CodeMirror) {
      editor = window.CodeMirror.fromTextArea(area, {
        // Long lines wrap: a phone's editor never scrolls sideways.
        mode: "python", lineNumbers: true, lineWrapping: true, indentUnit: 4, tabSize: 4, indentWithTabs: false,
        viewportMargin: Infinity, screenReaderLabel: "Your code",
        extraKeys: {
          // Tab indents inside the editor; Esc hands the keyboard back to the page.
          Tab: function (cm) {
            if (cm.somethingSelected()) cm.indentSelection("add");
            else cm.replaceSelection("    ", "end");
          },
          "Shift-Tab": function (cm) { cm.indentSelection("subtract"); },
          Esc: function () { runButton.focus(); },
          "Ctrl-Enter": function () { form.requestSubmit(runButton); },
        },
      });
      editor.getWrapperElement().classList.add("code-editor");
      // htmx reads the form's fields, so the textarea must hold the editor's text first.
      form.addEventListener("htmx:configRequest", function (event) {
        editor.save();
        event.detail.parameters.code = editor.getValue();
      });
      form.addEventListener("submit", function () { editor.save(); });
    }
    if (resetButton) {
      resetButton.hidden = false;
      resetButton.addEventListener("click", function () {
        if (editor) { editor.setValue(starterText); editor.focus(); }
        else { area.value = starterText; area.focus(); }
        var status = form.querySelector(".run-status");
        if (status) status.textContent = "Reset to the starter code.";
      });
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
