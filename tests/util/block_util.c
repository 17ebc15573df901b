/* Tiny random block drafters for tests (see block_util.h). */
#include "block_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

tbu_opts tbu_default(const rt_model *m)
{
	tbu_opts o;
	memset(&o, 0, sizeof(o));
	o.cond = "features";
	o.attn = "bidirectional";
	o.block = 4;
	o.draft_vocab = m->cfg.vocab;
	o.n_layers = 1;
	o.n_heads = m->cfg.n_heads;
	o.n_kv_heads = m->cfg.n_kv_heads;
	o.head_dim = m->cfg.head_dim;
	o.ffn = 2 * m->cfg.dim;
	o.n_taps = 2;
	o.taps[0] = 0;
	o.taps[1] = m->cfg.n_layers - 1;
	o.window = 6;
	o.scale = 1.0;
	o.qk_scale = o.vo_scale = 1.0;
	return o;
}

void tbu_config_text(const rt_model *m, const tbu_opts *o, char *out, size_t cap)
{
	char taps[128] = "[";
	for (int i = 0; i < o->n_taps; i++)
		snprintf(taps + strlen(taps), sizeof(taps) - strlen(taps), "%s%d", i ? ", " : "", o->taps[i]);
	strcat(taps, "]");
	snprintf(out, cap,
	         "{\"format\": \"specwright-block-drafter\", \"version\": 1, \"conditioning\": \"%s\",\n"
	         " \"block\": %d, \"draft_vocab\": %d,\n"
	         " \"target\": {\"dim\": %d, \"vocab\": %d, \"n_layers\": %d},\n"
	         " \"taps\": %s, \"window\": %d, \"block_attention\": \"%s\",\n"
	         " \"n_layers\": %d, \"n_heads\": %d, \"n_kv_heads\": %d, \"head_dim\": %d, \"ffn_dim\": %d,\n"
	         " \"norm_eps\": 1e-5, \"rope_theta\": 10000.0%s}\n",
	         o->cond, o->block, o->draft_vocab, m->cfg.dim, m->cfg.vocab, m->cfg.n_layers, taps, o->window, o->attn,
	         o->n_layers, o->n_heads, o->n_kv_heads, o->head_dim, o->ffn, o->map ? ", \"d2t\": true" : "");
}

struct tw {
	char name[64];
	int64_t d0, d1;
	double bias;
};

int tbu_write(const char *dir, const rt_model *m, const tbu_opts *o, uint64_t seed)
{
	char path[512], cfg[2048];
	int dim = m->cfg.dim, qd = o->n_heads * o->head_dim, kvd = o->n_kv_heads * o->head_dim;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	if (o->config_override) {
		fputs(o->config_override, f);
	} else {
		tbu_config_text(m, o, cfg, sizeof(cfg));
		fputs(cfg, f);
	}
	fclose(f);
	struct tw t[64];
	int n = 0;
	t[n++] = (struct tw){ "mask_embd", o->block - 1, dim, 0 };
	if (!strcmp(o->cond, "features")) {
		t[n++] = (struct tw){ "fc", dim, (int64_t)o->n_taps * dim, 0 };
		t[n++] = (struct tw){ "fc_norm", dim, 0, 1 };
	}
	t[n++] = (struct tw){ "out_norm", dim, 0, 1 };
	for (int l = 0; l < o->n_layers; l++) {
		struct { const char *k; int64_t d0, d1; double b; } lw[] = {
			{ "attn_norm", dim, 0, 1 }, { "wq", qd, dim, 0 }, { "wk", kvd, dim, 0 }, { "wv", kvd, dim, 0 },
			{ "wo", dim, qd, 0 }, { "ffn_norm", dim, 0, 1 }, { "w_gate", o->ffn, dim, 0 },
			{ "w_up", o->ffn, dim, 0 }, { "w_down", dim, o->ffn, 0 },
		};
		for (size_t i = 0; i < sizeof(lw) / sizeof(lw[0]); i++) {
			t[n] = (struct tw){ "", lw[i].d0, lw[i].d1, lw[i].b };
			snprintf(t[n].name, sizeof(t[n].name), "layers.%d.%s", l, lw[i].k);
			n++;
		}
	}
	if (o->extra_tensor)
		t[n++] = (struct tw){ "", 4, 0, 0 }, snprintf(t[n - 1].name, 64, "%s", o->extra_tensor);
	/* header */
	char *hdr = malloc(16384);
	size_t off = 0, k = 0;
	k += (size_t)snprintf(hdr + k, 16384 - k, "{");
	int first = 1;
	for (int i = 0; i < n; i++) {
		if (o->skip_tensor && !strcmp(o->skip_tensor, t[i].name))
			continue;
		if (o->bad_tensor && !strcmp(o->bad_tensor, t[i].name))
			t[i].d0++;
		size_t numel = (size_t)t[i].d0 * (size_t)(t[i].d1 ? t[i].d1 : 1);
		if (t[i].d1)
			k += (size_t)snprintf(hdr + k, 16384 - k, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
			                      first ? "" : ",", t[i].name, (long long)t[i].d0, (long long)t[i].d1, off,
			                      off + numel * 4);
		else
			k += (size_t)snprintf(hdr + k, 16384 - k, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
			                      first ? "" : ",", t[i].name, (long long)t[i].d0, off, off + numel * 4);
		first = 0;
		off += numel * 4;
	}
	if (o->map && o->map_bad != 2)
		k += (size_t)snprintf(hdr + k, 16384 - k, "%s\"d2t\":{\"dtype\":\"I64\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
		                      first ? "" : ",", o->draft_vocab, off, off + (size_t)o->draft_vocab * 8);
	k += (size_t)snprintf(hdr + k, 16384 - k, "}");
	while (k % 8)
		hdr[k++] = ' ';
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	f = fopen(path, "wb");
	if (!f) {
		free(hdr);
		return -1;
	}
	uint64_t hl = k;
	fwrite(&hl, 8, 1, f);
	fwrite(hdr, 1, k, f);
	uint64_t s = seed;
	for (int i = 0; i < n; i++) {
		if (o->skip_tensor && !strcmp(o->skip_tensor, t[i].name))
			continue;
		size_t numel = (size_t)t[i].d0 * (size_t)(t[i].d1 ? t[i].d1 : 1);
		double sc = t[i].d1 ? 2.0 * o->scale / sqrt((double)t[i].d1) : 0.2;
		if (!strcmp(t[i].name, "mask_embd"))
			sc = o->scale;
		const char *dot = strrchr(t[i].name, '.');
		if (dot && (!strcmp(dot, ".wq") || !strcmp(dot, ".wk")))
			sc *= o->qk_scale;
		if (dot && (!strcmp(dot, ".wv") || !strcmp(dot, ".wo")))
			sc *= o->vo_scale;
		for (size_t j = 0; j < numel; j++) {
			float v = (float)(t[i].bias + sc * (2 * tu_uniform(&s) - 1));
			fwrite(&v, 4, 1, f);
		}
	}
	for (int i = 0; o->map && o->map_bad != 2 && i < o->draft_vocab; i++) {
		int64_t v = (int64_t)o->map[i] - i;
		if (o->map_bad == 1 && i == 0)
			v = -1;
		fwrite(&v, 8, 1, f);
	}
	fclose(f);
	free(hdr);
	return 0;
}

void tbu_tmpdir(char *out)
{
	strcpy(out, "/tmp/sw_block_XXXXXX");
	if (!mkdtemp(out))
		out[0] = 0;
}

void tbu_rmdir(const char *dir)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/config.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	unlink(p);
	rmdir(dir);
}
