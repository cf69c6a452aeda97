// The library's drop zone: files and whole folders dropped on it, or picked,
// are put in the file input and listed beside the options; Upload sends them
// with the options shown then. Nothing is sent on choosing, so options set
// after choosing count. Without JavaScript the input still works as an
// ordinary multi-file picker.
(function () {
  "use strict";
  const zone = document.getElementById("dropzone");
  const input = document.getElementById("upload-files");
  const form = document.getElementById("upload-form");
  if (!zone || !input || !form) return;

  function readEntries(reader) {
    return new Promise((resolve, reject) => reader.readEntries(resolve, reject));
  }

  async function filesOf(entry) {
    if (entry.isFile) {
      return [await new Promise((resolve, reject) => entry.file(resolve, reject))];
    }
    if (!entry.isDirectory) return [];
    const reader = entry.createReader();
    const found = [];
    for (;;) {
      const batch = await readEntries(reader);  // a directory reads in batches
      if (!batch.length) break;
      for (const child of batch) found.push(...(await filesOf(child)));
    }
    return found;
  }

  const chosen = document.getElementById("chosen");
  const list = document.getElementById("chosen-files");
  const summary = document.getElementById("chosen-summary");
  const clear = document.getElementById("upload-clear");

  function size(bytes) {
    return bytes >= 1048576 ? (bytes / 1048576).toFixed(1) + " MB" : (bytes / 1024).toFixed(1) + " KB";
  }

  function show() {
    const files = Array.from(input.files);
    list.replaceChildren(...files.map((file) => {
      const item = document.createElement("li");
      item.textContent = `${file.webkitRelativePath || file.name} · ${size(file.size)}`;
      return item;
    }));
    summary.textContent = files.length
      ? `${files.length} file${files.length === 1 ? "" : "s"} chosen, not yet uploaded. Check the options, then press Upload.`
      : "";
    chosen.hidden = clear.hidden = !files.length;
  }

  function choose(files) {
    const transfer = new DataTransfer();
    for (const file of files) transfer.items.add(file);
    input.files = transfer.files;
    show();
  }

  clear.addEventListener("click", () => { input.value = ""; show(); });
  // After an upload that took files only the files are cleared; the options
  // stay as the reader set them. A refusal (4xx, swapped in) keeps both.
  form.addEventListener("htmx:afterRequest", (event) => {
    if (event.detail.elt === form && event.detail.xhr && event.detail.xhr.status < 400) { input.value = ""; show(); }
  });

  ["dragenter", "dragover"].forEach((name) => zone.addEventListener(name, (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  }));
  ["dragleave", "drop"].forEach((name) => zone.addEventListener(name, () => zone.classList.remove("dragging")));

  zone.addEventListener("drop", async (event) => {
    event.preventDefault();
    const items = Array.from(event.dataTransfer.items || []);
    const entries = items.map((item) => item.webkitGetAsEntry && item.webkitGetAsEntry()).filter(Boolean);
    let files;
    if (entries.length) {
      files = (await Promise.all(entries.map(filesOf))).flat();
      // Files in a dropped folder: only the kinds the library takes, so a
      // folder with images in it does not fill the page with refusals.
      if (entries.some((entry) => entry.isDirectory)) {
        files = files.filter((file) => /\.(md|markdown|txt|json|png|lorebook|story|scenario)$/i.test(file.name));
      }
    } else {
      files = Array.from(event.dataTransfer.files || []);
    }
    if (files.length) choose(files);
  });

  input.addEventListener("change", show);
})();
