package keyfunc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/keyfunc"
)

// A key from the path parameter, with a constant in front. The id is
// escaped, so "1:pay" cannot pose as order 1's "pay" key.
func ExampleJoin() {
	key := keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("id"))

	r := gin.New()
	r.POST("/orders/:id", func(c *gin.Context) {
		k, err := key(c)
		fmt.Println(k, err)
	})
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/orders/42", nil))
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/orders/1:pay", nil))
	// Output:
	// order:42 <nil>
	// order:1%3Apay <nil>
}

// The same key written as a template, plus a header.
func ExampleMustTemplate() {
	key := keyfunc.MustTemplate("order:{param.id}:{header.X-Tenant}")

	r := gin.New()
	r.POST("/orders/:id", func(c *gin.Context) {
		k, err := key(c)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(k)
	})
	req := httptest.NewRequest("POST", "/orders/42", nil)
	req.Header.Set("X-Tenant", "acme")
	r.ServeHTTP(httptest.NewRecorder(), req)
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/orders/42", nil))
	// Output:
	// order:42:acme
	// keyfunc: missing key part "header X-Tenant"
}

// A field of a JSON body: the number stays exact, and the handler can still
// bind the body.
func ExampleJSON() {
	key := keyfunc.JSON("order.id")

	r := gin.New()
	r.POST("/pay", func(c *gin.Context) {
		k, err := key(c)
		var body struct {
			Order struct {
				ID json.Number `json:"id"`
			} `json:"order"`
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		bindErr := c.ShouldBindBodyWithJSON(&body)
		fmt.Println(k, body.Order.ID, bindErr)
	})
	body := `{"order":{"id":12345678901234567891}}`
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/pay", strings.NewReader(body)))

	big := `{"order":{"id":"` + strings.Repeat("x", 2<<20) + `"}}`
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/pay", strings.NewReader(big)))
	// Output:
	// 12345678901234567891 12345678901234567891 <nil>
	// keyfunc: request body too large (limit 1048576 bytes)
}

// Mapping key errors to HTTP statuses, as the middleware package does.
func ExampleErrMissingPart() {
	status := func(err error) int {
		switch {
		case err == nil:
			return http.StatusOK
		case errors.Is(err, keyfunc.ErrBodyTooLarge):
			return http.StatusRequestEntityTooLarge
		case errors.Is(err, keyfunc.ErrMissingPart), errors.Is(err, keyfunc.ErrAmbiguousPart),
			errors.Is(err, keyfunc.ErrMalformedBody):
			return http.StatusBadRequest
		}
		return http.StatusInternalServerError
	}
	_, err := keyfunc.Key("order", "")
	fmt.Println(status(err), err)
	// Output:
	// 400 keyfunc: missing key part "part 2"
}

// Keys for code outside a request, and the long-key form.
func ExampleKey() {
	k, _ := keyfunc.Key("report", "2024-06", "eu:west")
	fmt.Println(k)
	long := keyfunc.Shorten("report:" + strings.Repeat("x", 300))
	fmt.Println(len(long), long[:20]+"...", long[len(long)-66:len(long)-64])
	// Output:
	// report:2024-06:eu%3Awest
	// 200 report:xxxxxxxxxxxxx... :#
}

// net/http (Go 1.22 patterns, chi): the same parts for a plain request.
func ExampleJoinRequest() {
	key := keyfunc.JoinRequest(keyfunc.RequestConst("order"), keyfunc.PathValue("id"))

	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		k, err := key(r)
		fmt.Println(k, err)
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/orders/42", nil))
	// Output:
	// order:42 <nil>
}
